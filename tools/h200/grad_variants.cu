// Work-split experiments for the reduction's backward with a 1-D w and a
// gradient per row, outside PyTorch:
//   gx[r, j] = 2 w[j] x[r, j] g[r],   gw[j] = sum_r x[r, j]^2 g[r].
// The library's kernel (grad_per_feature_kernel: threads laid out (column
// vector, row), rows grid-strided, kRows of them loaded before any is used,
// partial column sums per block finished by a second kernel) against:
//  - a register bound (kMinBlocks resident blocks of 256 threads);
//  - 8 rows in flight instead of 4;
//  - a grid sized from the kernel's real occupancy (the library assumes
//    2048 / 256 = 8 blocks per multiprocessor) in one or two waves;
//  - contiguous rows per block (each block walks its own span of rows, so
//    the loads in flight of a block are one contiguous piece of memory);
//  - blocks as wide as the row (up to 256 column vectors, one row per
//    iteration) instead of 32 column vectors by 8 rows.
// Each variant's two kernels are timed back-to-back per call as the library
// launches them (an event pair per call, medians), against the copy
// bandwidth and a plain read-x-write-gx kernel of the same run; outputs are
// checked against the library variant's (first repeat).
//
//   nvcc -O3 -arch=sm_90 -o /tmp/gv tools/h200/grad_variants.cu && /tmp/gv
#include <cmath>

#include "standalone.cuh"

template <typename T>
constexpr int kV = 16 / sizeof(T);

template <typename T>
__device__ __forceinline__ Vec<T, kV<T>> load(const T* p) {
  return *reinterpret_cast<const Vec<T, kV<T>>*>(p);
}

template <typename T>
__device__ __forceinline__ void store(T* p, const Vec<T, kV<T>> v) {
  *reinterpret_cast<Vec<T, kV<T>>*>(p) = v;
}

// kChunked: block y walks rows [y * chunk, (y + 1) * chunk) with its
// blockDim.y row lanes, kRows rows per lane in flight (adjacent rows);
// otherwise rows are grid-strided and the kRows in flight are one grid
// stride apart (the library).
template <typename T, int kRows, int kMinBlocks, bool kChunked,
          bool kLean = false>
__global__ void __launch_bounds__(256, kMinBlocks)
    per_feature(const T* __restrict__ g, const T* __restrict__ x,
                const T* __restrict__ w, T* __restrict__ gx,
                float* __restrict__ partial, long rows, long cols) {
  constexpr int N = kV<T>;
  __shared__ float sums[256 * N];
  const long vcols = cols / N;
  const long c = long(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc[N] = {};
  long begin, end, step;
  if constexpr (kChunked) {
    const long chunk = (rows + gridDim.y - 1) / gridDim.y;
    begin = long(blockIdx.y) * chunk + threadIdx.y;
    end = min(rows, long(blockIdx.y + 1) * chunk);
    step = blockDim.y;
  } else {
    begin = long(blockIdx.y) * blockDim.y + threadIdx.y;
    end = rows;
    step = long(gridDim.y) * blockDim.y;
  }
  if (c < vcols) {
    const auto wv = load(w + c * N);
    if constexpr (kLean) {
      // One pointer per array, advanced by a fixed step; the kRows in flight
      // sit at fixed offsets from it, and full iterations skip the checks.
      const long row_step = step * cols;
      const T* xp = x + begin * cols + c * N;
      T* op = gx + begin * cols + c * N;
      const T* gp = g + begin;
      for (long r0 = begin; r0 < end; r0 += step * kRows,
                xp += row_step * kRows, op += row_step * kRows,
                gp += step * kRows) {
        Vec<T, N> xv[kRows];
        float gr[kRows];
        const bool full = r0 + (kRows - 1) * step < end;
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          if (full || r0 + u * step < end) {
            xv[u] = load(xp + u * row_step);
            gr[u] = to_f(gp[u * step]);
          }
        }
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          if (full || r0 + u * step < end) {
            Vec<T, N> o;
#pragma unroll
            for (int k = 0; k < N; ++k) {
              const float xf = to_f(xv[u].v[k]);
              o.v[k] = from_f<T>(2.f * to_f(wv.v[k]) * xf * gr[u]);
              acc[k] += xf * xf * gr[u];
            }
            store(op + u * row_step, o);
          }
        }
      }
    } else {
      for (long r0 = begin; r0 < end; r0 += step * kRows) {
        Vec<T, N> xv[kRows];
        float gr[kRows];
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          const long r = r0 + u * step;
          if (r < end) {
            xv[u] = load(x + r * cols + c * N);
            gr[u] = to_f(g[r]);
          }
        }
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          const long r = r0 + u * step;
          if (r < end) {
            Vec<T, N> o;
#pragma unroll
            for (int k = 0; k < N; ++k) {
              const float xf = to_f(xv[u].v[k]);
              o.v[k] = from_f<T>(2.f * to_f(wv.v[k]) * xf * gr[u]);
              acc[k] += xf * xf * gr[u];
            }
            store(gx + r * cols + c * N, o);
          }
        }
      }
    }
  }
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < N; ++k) sums[t * N + k] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= vcols) return;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float s = 0;
    for (int y = 0; y < int(blockDim.y); ++y)
      s += sums[(y * blockDim.x + threadIdx.x) * N + k];
    partial[long(blockIdx.y) * cols + c * N + k] = s;
  }
}

// The library's finishing kernel: 32 columns per block, 32 threads per column.
template <typename T>
__global__ void __launch_bounds__(1024)
    finish(const float* __restrict__ partial, T* __restrict__ gw, long parts,
           long cols) {
  __shared__ float sums[32][33];
  const long j = long(blockIdx.x) * 32 + threadIdx.x;
  float s = 0;
  if (j < cols)
    for (long p = threadIdx.y; p < parts; p += 32) s += partial[p * cols + j];
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  float total = 0;
  for (int y = 0; y < 32; ++y) total += sums[y][threadIdx.x];
  gw[j] = from_f<T>(total);
}

// The streaming half alone: read x, write gx (no g, no column sums).
template <typename T>
__global__ void __launch_bounds__(256)
    stream_only(const T* __restrict__ x, T* __restrict__ gx, long nvec) {
  for (long v = long(blockIdx.x) * 256 + threadIdx.x; v < nvec;
       v += long(gridDim.x) * 256) {
    auto xv = load(x + v * kV<T>);
#pragma unroll
    for (int k = 0; k < kV<T>; ++k) xv.v[k] = from_f<T>(2.f * to_f(xv.v[k]));
    store(gx + v * kV<T>, xv);
  }
}

template <typename T>
struct Problem {
  long rows, cols;
  T *g, *x, *w, *gx, *gw;
  float* partial;
  std::vector<float> ref_gx, ref_gw;  // the library variant's results
  double copy, bytes;
  int sms;
  bool check;  // compare with the library variant's outputs
};

template <typename T>
std::vector<float> fetch(const T* p, long n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (long i = 0; i < n; ++i) f[i] = to_f(h[i]);
  return f;
}

template <typename T, int kRows, int kMinBlocks, bool kChunked,
          bool kLean = false>
void run(Problem<T>& p, const char* label, int tx, double waves) {
  auto kernel = per_feature<T, kRows, kMinBlocks, kChunked, kLean>;
  const long vcols = p.cols / kV<T>;
  const int ty = 256 / tx;
  const long grid_x = (vcols + tx - 1) / tx;
  int occ;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 256, 0));
  // waves == 0: the library's grid (two waves of 8 blocks per SM, assumed).
  const long resident = waves == 0 ? 2L * p.sms * 8 : long(waves * p.sms * occ);
  const long grid_y =
      std::max(1L, std::min({(p.rows + ty - 1) / ty,
                             (resident + grid_x - 1) / grid_x, 65535L}));
  const dim3 grid(grid_x, grid_y), block(tx, ty);
  const long fin = (p.cols + 31) / 32;
  auto launch = [&] {
    kernel<<<grid, block>>>(p.g, p.x, p.w, p.gx, p.partial, p.rows, p.cols);
    finish<T><<<fin, dim3(32, 32)>>>(p.partial, p.gw, grid_y, p.cols);
  };
  const float ms = back_to_back_ms(launch);
  const float main_ms = back_to_back_ms([&] {
    kernel<<<grid, block>>>(p.g, p.x, p.w, p.gx, p.partial, p.rows, p.cols);
  });
  if (!p.check) {
    std::printf(
        "  %-44s %2d blk/SM grid %5ldx%-5ld %.4f ms %5.1f%%  (main kernel %.4f "
        "ms %5.1f%%)\n",
        label, occ, grid_x, grid_y, ms, 100 * p.bytes / ms / 1e6 / p.copy,
        main_ms, 100 * p.bytes / main_ms / 1e6 / p.copy);
    return;
  }
  const auto gx = fetch(p.gx, p.rows * p.cols);
  const auto gw = fetch(p.gw, p.cols);
  if (p.ref_gx.empty()) {
    p.ref_gx = gx;
    p.ref_gw = gw;
  }
  double err_gx = 0, err_gw = 0;
  for (size_t i = 0; i < gx.size(); ++i)
    err_gx = std::max(err_gx, double(std::fabs(gx[i] - p.ref_gx[i])));
  for (size_t i = 0; i < gw.size(); ++i)
    err_gw = std::max(err_gw, std::fabs(gw[i] - p.ref_gw[i]) /
                                  (1.0 + std::fabs(p.ref_gw[i])));
  std::printf(
      "  %-44s %2d blk/SM grid %5ldx%-5ld %.4f ms %5.1f%%  (main kernel "
      "%.4f ms %5.1f%%)  max|dgx| %.1e rel dgw %.1e\n",
      label, occ, grid_x, grid_y, ms, 100 * p.bytes / ms / 1e6 / p.copy,
      main_ms, 100 * p.bytes / main_ms / 1e6 / p.copy, err_gx, err_gw);
}

template <typename T>
void shape(const char* name, long rows, long cols, int sms, double copy,
           bool check) {
  Problem<T> p;
  p.check = check;
  p.rows = rows;
  p.cols = cols;
  p.sms = sms;
  p.copy = copy;
  const long n = rows * cols;
  p.bytes = double(2 * n + 2 * cols + rows) * sizeof(T);
  CHECK(cudaMalloc(&p.g, rows * sizeof(T)));
  CHECK(cudaMalloc(&p.x, n * sizeof(T)));
  CHECK(cudaMalloc(&p.w, cols * sizeof(T)));
  CHECK(cudaMalloc(&p.gx, n * sizeof(T)));
  CHECK(cudaMalloc(&p.gw, cols * sizeof(T)));
  // grid_y * cols <= (resident / grid_x + 1) * grid_x * 256 * kV floats.
  CHECK(cudaMalloc(&p.partial,
                   (4L * sms * 8 + cols / kV<T>)*256 * kV<T> * sizeof(float)));
  fill<<<(n + 255) / 256, 256>>>(p.x, n, 1u);
  fill<<<(rows + 255) / 256, 256>>>(p.g, rows, 2u);
  fill<<<(cols + 255) / 256, 256>>>(p.w, cols, 3u);
  CHECK(cudaDeviceSynchronize());
  const long vcols = cols / kV<T>;
  int tx = 1;
  while (tx < 32 && tx < vcols) tx *= 2;  // the library's layout
  int wide = 1;
  while (wide < 256 && wide < vcols) wide *= 2;
  std::printf("%s %ldx%ld (tx %d)\n", name, rows, cols, tx);
  const float s_ms = back_to_back_ms(
      [&] { stream_only<T><<<sms * 8 * 4, 256>>>(p.x, p.gx, n / kV<T>); });
  std::printf("  %-44s %.4f ms %5.1f%% (its own bytes: %5.1f%%)\n",
              "read x, write gx only", s_ms, 100 * p.bytes / s_ms / 1e6 / copy,
              100 * 2.0 * n * sizeof(T) / s_ms / 1e6 / copy);
  run<T, 4, 1, false>(p, "library (4 rows in flight, strided)", tx, 0);
  run<T, 4, 6, false>(p, "library, 40 registers", tx, 0);
  run<T, 4, 8, false>(p, "library, 32 registers", tx, 0);
  run<T, 8, 1, false>(p, "8 rows in flight", tx, 0);
  run<T, 4, 1, false>(p, "library, real occupancy, 1 wave", tx, 1);
  run<T, 4, 1, false>(p, "library, real occupancy, 2 waves", tx, 2);
  run<T, 4, 1, false, true>(p, "lean pointers", tx, 0);
  run<T, 8, 1, false, true>(p, "lean pointers, 8 in flight", tx, 0);
  run<T, 8, 4, false, true>(p, "lean, 8 in flight, 64 registers", tx, 0);
  run<T, 4, 1, false, true>(p, "lean pointers, real occupancy, 1 wave", tx, 1);
  run<T, 4, 1, true>(p, "contiguous rows per block", tx, 0);
  run<T, 4, 1, true>(p, "contiguous rows, 1 wave", tx, 1);
  run<T, 4, 1, true>(p, "contiguous rows, 4 waves", tx, 4);
  run<T, 4, 1, true, true>(p, "lean, contiguous rows, 1 wave", tx, 1);
  run<T, 8, 1, true, true>(p, "lean, contiguous, 8 in flight, 1 wave", tx, 1);
  if (wide != tx) {
    run<T, 4, 1, false>(p, "wide blocks (a row piece per warp)", wide, 0);
    run<T, 4, 1, true>(p, "wide blocks, contiguous rows, 1 wave", wide, 1);
    run<T, 8, 1, true>(p, "wide blocks, contiguous, 8 in flight, 1 wave", wide,
                       1);
  }
  CHECK(cudaFree(p.g));
  CHECK(cudaFree(p.x));
  CHECK(cudaFree(p.w));
  CHECK(cudaFree(p.gx));
  CHECK(cudaFree(p.gw));
  CHECK(cudaFree(p.partial));
}

int main() {
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double copy =
      copy_gbps([](auto launch) { return back_to_back_ms(launch); });
  std::printf("%d SMs, copy back-to-back %.0f GB/s (the ceiling below)\n", sms,
              copy);
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::printf("== repeat %d\n", repeat);
    const bool check = repeat == 0;
    shape<float>("fp32", 1048576, 128, sms, copy, check);
    shape<float>("fp32", 4096, 65536, sms, copy, check);
    shape<__nv_bfloat16>("bf16", 1048576, 128, sms, copy, check);
    shape<__nv_bfloat16>("bf16", 4096, 65536, sms, copy, check);
    shape<float>("fp32", 65536, 1024, sms, copy, check);
  }
  return 0;
}
