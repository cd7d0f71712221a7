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
//    iteration) instead of 32 column vectors by 8 rows;
//  - a given number of rows per thread (short-lived blocks, thousands of
//    partial rows finished in two levels);
//  - --dynamic: one wave of blocks that take chunks of rows from a counter
//    (atomicAdd), to test whether the 1:1 read-write stream loses to
//    long-lived threads because they drift apart over memory (the block
//    scheduler keeps a grid of one vector per thread a compact window);
//  - --bulk: one or two resident waves of blocks that stream x through
//    shared-memory stages with Hopper's bulk asynchronous copy (each block
//    keeps several 8-32 KB chunks in flight without registers), static or
//    dynamic chunks, gx stored from registers or by bulk copy (bulk_async.cuh).
// Each variant's two kernels are timed back-to-back per call as the library
// launches them (an event pair per call, medians), against the copy
// bandwidth and a plain read-x-write-gx kernel of the same run; outputs are
// checked against the library variant's (first repeat).
//
//   nvcc -O3 -arch=sm_90 -o /tmp/gv tools/h200/grad_variants.cu && /tmp/gv
//   [--streams | --dynamic | --bulk]
#include <cmath>
#include <string>

#include "bulk_async.cuh"
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

// st.global.cs: a 16-byte store marked evict-first.
__device__ __forceinline__ void store_cs(void* p, const void* v) {
  __stcs(reinterpret_cast<float4*>(p), *reinterpret_cast<const float4*>(v));
}

// One row's vector of the backward: stores gx = 2 w x g (kCs: evict-first)
// and adds x^2 g to the thread's column sums.
template <typename T, bool kCs = false>
__device__ __forceinline__ void grad_vector(const Vec<T, kV<T>> xv,
                                            const Vec<T, kV<T>> wv, float g,
                                            float* acc, T* out) {
  Vec<T, kV<T>> o;
#pragma unroll
  for (int k = 0; k < kV<T>; ++k) {
    const float xf = to_f(xv.v[k]);
    o.v[k] = from_f<T>(2.f * to_f(wv.v[k]) * xf * g);
    acc[k] += xf * xf * g;
  }
  if constexpr (kCs) {
    store_cs(out, &o);
  } else {
    store(out, o);
  }
}

// The block's column sums, reduced over threadIdx.y in shared memory `sums`
// (256 * kV floats), written as partial row blockIdx.y.
template <typename T>
__device__ __forceinline__ void write_partial(const float* acc, float* sums,
                                              float* partial, long c,
                                              long vcols, long cols) {
  constexpr int N = kV<T>;
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

// kChunked: block y walks rows [y * chunk, (y + 1) * chunk) with its
// blockDim.y row lanes, kRows rows per lane in flight (adjacent rows);
// otherwise rows are grid-strided and the kRows in flight are one grid
// stride apart (the library).
template <typename T, int kRows, int kMinBlocks, bool kChunked,
          bool kLean = false, bool kCs = false>
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
          if (full || r0 + u * step < end)
            grad_vector<T, kCs>(xv[u], wv, gr[u], acc, op + u * row_step);
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
          if (r < end)
            grad_vector<T>(xv[u], wv, gr[u], acc, gx + r * cols + c * N);
        }
      }
    }
  }
  write_partial<T>(acc, sums, partial, c, vcols, cols);
}

// The library's finishing kernel (fc = 32): fc columns per block, 1024 / fc
// threads per column; block (x, y) sums partial rows [y * per, (y + 1) * per)
// into row y of `out` (per = parts: grad_w itself; smaller: the first level
// of a two-level finish, into float rows).
template <typename Out>
__global__ void __launch_bounds__(1024)
    finish(const float* __restrict__ partial, Out* __restrict__ out, long parts,
           long cols, long per) {
  __shared__ float sums[2048];
  const int fc = blockDim.x;
  const long j = long(blockIdx.x) * fc + threadIdx.x;
  const long end = min(parts, long(blockIdx.y + 1) * per);
  float s = 0;
  if (j < cols)
    for (long p = blockIdx.y * per + threadIdx.y; p < end; p += blockDim.y)
      s += partial[p * cols + j];
  sums[threadIdx.y * (fc + 1) + threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  float total = 0;
  for (int y = 0; y < int(blockDim.y); ++y)
    total += sums[y * (fc + 1) + threadIdx.x];
  out[long(blockIdx.y) * cols + j] = from_f<Out>(total);
}

// The streaming half alone: read x, write gx (no g, no column sums), kUnroll
// vectors per thread per grid step (all loaded before any is stored), stored
// plain or kCs (st.global.cs: evict first).
template <typename T, int kUnroll, bool kCs>
__global__ void __launch_bounds__(256)
    stream_only(const T* __restrict__ x, T* __restrict__ gx, long nvec) {
  using Vt = Vec<T, kV<T>>;
  const long stride = long(gridDim.x) * 256;
  for (long v0 = long(blockIdx.x) * 256 + threadIdx.x; v0 < nvec;
       v0 += stride * kUnroll) {
    Vt xv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (v0 + u * stride < nvec) xv[u] = load(x + (v0 + u * stride) * kV<T>);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (v0 + u * stride < nvec) {
#pragma unroll
        for (int k = 0; k < kV<T>; ++k)
          xv[u].v[k] = from_f<T>(2.f * to_f(xv[u].v[k]));
        T* o = gx + (v0 + u * stride) * kV<T>;
        if constexpr (kCs) {
          store_cs(o, &xv[u]);
        } else {
          store(o, xv[u]);
        }
      }
    }
  }
}

template <typename T, int kUnroll, bool kCs>
void stream_case(const char* label, const T* x, T* gx, long n, long blocks,
                 double bytes, double copy) {
  const float ms = back_to_back_ms(
      [&] { stream_only<T, kUnroll, kCs><<<blocks, 256>>>(x, gx, n / kV<T>); });
  std::printf("  %-44s %.4f ms %5.1f%% (its own bytes: %5.1f%%)\n", label, ms,
              100 * bytes / ms / 1e6 / copy,
              100 * 2.0 * n * sizeof(T) / ms / 1e6 / copy);
}

// Dynamic assignment: one resident wave of blocks takes chunks of work from
// a counter (atomicAdd) until none are left. The chunks in flight then stay a
// compact window of memory however far the blocks drift apart, as the block
// scheduler keeps it for a grid of one vector per thread, while a block lives
// long enough to keep its column sums in registers across chunks.
template <typename T, int kUnroll>
__global__ void __launch_bounds__(256)
    stream_dynamic(const T* __restrict__ x, T* __restrict__ gx, long nvec,
                   unsigned long long* __restrict__ counter, long chunk) {
  __shared__ long first;
  for (;;) {
    if (threadIdx.x == 0) first = long(atomicAdd(counter, 1ull)) * chunk;
    __syncthreads();
    const long c0 = first;
    __syncthreads();  // every thread has read `first` before it changes
    if (c0 >= nvec) return;
    const long c1 = min(nvec, c0 + chunk);
    for (long v0 = c0 + threadIdx.x; v0 < c1; v0 += 256 * kUnroll) {
      Vec<T, kV<T>> xv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v0 + u * 256 < c1) xv[u] = load(x + (v0 + u * 256) * kV<T>);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (v0 + u * 256 < c1) {
#pragma unroll
          for (int k = 0; k < kV<T>; ++k)
            xv[u].v[k] = from_f<T>(2.f * to_f(xv[u].v[k]));
          store(gx + (v0 + u * 256) * kV<T>, xv[u]);
        }
      }
    }
  }
}

// The backward with chunks of chunk_rows rows taken from counters[blockIdx.x]
// (rows adjacent within a chunk: a block's kRows loads in flight are kRows *
// blockDim.y consecutive rows); one partial row per block, as per_feature.
template <typename T, int kRows>
__global__ void __launch_bounds__(256)
    per_feature_dynamic(const T* __restrict__ g, const T* __restrict__ x,
                        const T* __restrict__ w, T* __restrict__ gx,
                        float* __restrict__ partial, long rows, long cols,
                        unsigned long long* __restrict__ counters,
                        long chunk_rows) {
  constexpr int N = kV<T>;
  __shared__ float sums[256 * N];
  __shared__ long first;
  const long vcols = cols / N;
  const long c = long(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool lead = threadIdx.x == 0 && threadIdx.y == 0;
  float acc[N] = {};
  Vec<T, N> wv;
  if (c < vcols) wv = load(w + c * N);
  for (;;) {
    if (lead) first = long(atomicAdd(counters + blockIdx.x, 1ull)) * chunk_rows;
    __syncthreads();
    const long r_begin = first;
    __syncthreads();
    if (r_begin >= rows) break;
    const long r_end = min(rows, r_begin + chunk_rows);
    if (c >= vcols) continue;
    for (long r0 = r_begin + threadIdx.y; r0 < r_end;
         r0 += long(blockDim.y) * kRows) {
      Vec<T, N> xv[kRows];
      float gr[kRows];
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        const long r = r0 + u * long(blockDim.y);
        if (r < r_end) {
          xv[u] = load(x + r * cols + c * N);
          gr[u] = to_f(g[r]);
        }
      }
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        const long r = r0 + u * long(blockDim.y);
        if (r < r_end)
          grad_vector<T>(xv[u], wv, gr[u], acc, gx + r * cols + c * N);
      }
    }
  }
  write_partial<T>(acc, sums, partial, c, vcols, cols);
}

__host__ __device__ inline int stage_bytes_of(int stage_rows, int tw, int n,
                                              int elem) {
  return stage_rows * tw * n * elem;
}

// The plain stream through kStages bulk-copy stages of stage_bytes: chunk c
// is x's elements [c * chunk, (c + 1) * chunk); gx = 2 x stored from registers
// or (kBulkStore) written back into the stage and stored by bulk copy.
// Chunks static (blockIdx.x + k * gridDim.x) or taken from *counter.
template <typename T, int kStages, bool kBulkStore, bool kDynamic>
__global__ void __launch_bounds__(256)
    stream_bulk(const T* __restrict__ x, T* __restrict__ gx, long n,
                int stage_bytes, unsigned long long* __restrict__ counter) {
  using Vt = Vec<T, kV<T>>;
  extern __shared__ __align__(128) char stages[];
  const long chunk = stage_bytes / long(sizeof(T));
  const long chunks = (n + chunk - 1) / chunk;
  long k = 0;
  auto next = [&]() -> long {
    const long c = kDynamic ? long(atomicAdd(counter, 1ull))
                            : long(blockIdx.x) + (k++) * long(gridDim.x);
    return c < chunks ? c : -1;
  };
  auto issue = [&](long c, char* st, uint64_t* bar) {
    const unsigned bytes = unsigned(min(chunk, n - c * chunk) * sizeof(T));
    if constexpr (kBulkStore) wait_bulk_reads<0>();  // the stage's last store
    mbar_arrive_expect(bar, bytes);
    bulk_load(st, x + c * chunk, bytes, bar);
  };
  auto consume = [&](long c, char* st) {
    const long e0 = c * chunk, nv = min(chunk, n - e0) / kV<T>;
    Vt* sv = reinterpret_cast<Vt*>(st);
    for (long v = threadIdx.x; v < nv; v += 256) {
      Vt xv = sv[v];
#pragma unroll
      for (int j = 0; j < kV<T>; ++j) xv.v[j] = from_f<T>(2.f * to_f(xv.v[j]));
      if constexpr (kBulkStore) {
        sv[v] = xv;
      } else {
        store(gx + e0 + v * kV<T>, xv);
      }
    }
    if constexpr (kBulkStore) {
      fence_async_shared();
      __syncthreads();
      if (threadIdx.x == 0)
        bulk_store(gx + e0, st, unsigned(nv * kV<T> * sizeof(T)));
    }
  };
  bulk_pipeline<kStages>(stages, stage_bytes, next, issue, consume);
  if constexpr (kBulkStore)
    if (threadIdx.x == 0) wait_bulk_writes<0>();
}

// The backward through kStages bulk-copy stages: block (bx, by) owns column
// vectors [bx * tw, (bx + 1) * tw) (threads (tw, 256 / tw)); chunk c is rows
// [c * stage_rows, ...) of that column span, one bulk copy when the span is
// the whole row, else one per row. Chunks static (by + k * gridDim.y) or from
// counters[bx]; column sums in registers, one partial row per block.
template <typename T, int kStages, bool kDynamic>
__global__ void __launch_bounds__(256)
    per_feature_bulk(const T* __restrict__ g, const T* __restrict__ x,
                     const T* __restrict__ w, T* __restrict__ gx,
                     float* __restrict__ partial, long rows, long cols,
                     int stage_rows, unsigned long long* __restrict__ counters) {
  constexpr int N = kV<T>;
  using Vt = Vec<T, N>;
  extern __shared__ __align__(128) char stages[];
  __shared__ float sums[256 * N];
  const long vcols = cols / N;
  const int tw = blockDim.x;
  const long cv = long(blockIdx.x) * tw + threadIdx.x;
  const long chunks = (rows + stage_rows - 1) / stage_rows;
  const Vt wv = load(w + cv * N);
  float acc[N] = {};
  long k = 0;
  auto next = [&]() -> long {
    const long c = kDynamic ? long(atomicAdd(counters + blockIdx.x, 1ull))
                            : long(blockIdx.y) + (k++) * long(gridDim.y);
    return c < chunks ? c : -1;
  };
  auto issue = [&](long c, char* st, uint64_t* bar) {
    const long r0 = c * stage_rows, nr = min(long(stage_rows), rows - r0);
    const unsigned row_bytes = unsigned(tw * sizeof(Vt));
    mbar_arrive_expect(bar, unsigned(nr) * row_bytes);
    if (tw == vcols) {
      bulk_load(st, x + r0 * cols, unsigned(nr) * row_bytes, bar);
    } else {
      for (long lr = 0; lr < nr; ++lr)
        bulk_load(st + lr * row_bytes, x + (r0 + lr) * cols + blockIdx.x * tw * N,
                  row_bytes, bar);
    }
  };
  auto consume = [&](long c, char* st) {
    const long r0 = c * stage_rows, nr = min(long(stage_rows), rows - r0);
    const Vt* sv = reinterpret_cast<const Vt*>(st);
#pragma unroll 4
    for (long lr = threadIdx.y; lr < nr; lr += blockDim.y) {
      const long r = r0 + lr;
      grad_vector<T>(sv[lr * tw + threadIdx.x], wv, to_f(g[r]), acc,
                     gx + r * cols + cv * N);
    }
  };
  bulk_pipeline<kStages>(stages, stage_bytes_of(stage_rows, tw, N, sizeof(T)),
                         next, issue, consume);
  write_partial<T>(acc, sums, partial, cv, vcols, cols);
}

template <typename T>
struct Problem {
  long rows, cols;
  T *g, *x, *w, *gx, *gw;
  float *partial, *partial2;
  unsigned long long* counters;  // per column block, for the dynamic variants
  std::vector<float> ref_gx, ref_gw;  // the library variant's results
  double copy, bytes;
  int sms;
  bool check;  // compare with the library variant's outputs
};

// Launches the finish for grid_y partial rows: one level up to 256 rows, two
// above (a first level sums 128 rows per block).
template <typename T>
void launch_finish(Problem<T>& p, long grid_y, int fc) {
  const long per = 128, levels = grid_y > 256 ? (grid_y + per - 1) / per : 0;
  const long fin = (p.cols + fc - 1) / fc;
  const dim3 block(fc, 1024 / fc);
  if (levels) {
    finish<float><<<dim3(fin, levels), block>>>(p.partial, p.partial2, grid_y,
                                                p.cols, per);
    finish<T><<<fin, block>>>(p.partial2, p.gw, levels, p.cols, levels);
  } else {
    finish<T><<<fin, block>>>(p.partial, p.gw, grid_y, p.cols, grid_y);
  }
}

// Times a variant (all its kernels, then its main kernel alone) and, in the
// checking repeat, compares its outputs with the first variant's.
template <typename T, typename All, typename Main>
void report(Problem<T>& p, const char* label, int occ, long grid_x, long grid_y,
            All all, Main main_only) {
  const float ms = back_to_back_ms(all);
  const float main_ms = back_to_back_ms(main_only);
  if (!p.check) {
    std::printf(
        "  %-44s %2d blk/SM grid %5ldx%-5ld %.4f ms %5.1f%%  (main kernel %.4f "
        "ms %5.1f%%)\n",
        label, occ, grid_x, grid_y, ms, 100 * p.bytes / ms / 1e6 / p.copy,
        main_ms, 100 * p.bytes / main_ms / 1e6 / p.copy);
    return;
  }
  const auto gx = to_host(p.gx, p.rows * p.cols);
  const auto gw = to_host(p.gw, p.cols);
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

// report() for a variant whose partial rows the library's finish (fc = 32) sums.
template <typename T, typename Main>
void report_finished(Problem<T>& p, const char* label, int occ, long grid_x,
                     long grid_y, Main main_only) {
  report(
      p, label, occ, grid_x, grid_y,
      [&] {
        main_only();
        launch_finish(p, grid_y, 32);
      },
      main_only);
}

template <typename T, int kRows, int kMinBlocks, bool kChunked,
          bool kLean = false, bool kCs = false>
void run(Problem<T>& p, const char* label, int tx, double waves, int fc = 32) {
  auto kernel = per_feature<T, kRows, kMinBlocks, kChunked, kLean, kCs>;
  const long vcols = p.cols / kV<T>;
  const int ty = 256 / tx;
  const long grid_x = (vcols + tx - 1) / tx;
  int occ;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 256, 0));
  // waves == 0: the library's grid (two waves of 8 blocks per SM, assumed);
  // waves < 0: -waves rows per thread (short-lived blocks, many partials).
  const long resident = waves == 0 ? 2L * p.sms * 8 : long(waves * p.sms * occ);
  const long grid_y =
      waves < 0
          ? std::min((p.rows + ty * long(-waves) - 1) / (ty * long(-waves)),
                     65535L)
          : std::max(1L, std::min({(p.rows + ty - 1) / ty,
                                   (resident + grid_x - 1) / grid_x, 65535L}));
  const dim3 grid(grid_x, grid_y), block(tx, ty);
  auto main_only = [&] {
    kernel<<<grid, block>>>(p.g, p.x, p.w, p.gx, p.partial, p.rows, p.cols);
  };
  report(
      p, label, occ, grid_x, grid_y,
      [&] {
        main_only();
        launch_finish(p, grid_y, fc);
      },
      main_only);
}

// One resident wave of per_feature_dynamic: column block x takes chunks of
// kSteps * kRows * ty rows from counters[x].
template <typename T, int kRows, int kSteps>
void run_dynamic(Problem<T>& p, const char* label, int tx) {
  auto kernel = per_feature_dynamic<T, kRows>;
  const long vcols = p.cols / kV<T>;
  const int ty = 256 / tx;
  const long grid_x = (vcols + tx - 1) / tx;
  int occ;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 256, 0));
  const long chunk_rows = long(kSteps) * kRows * ty;
  const long chunks = (p.rows + chunk_rows - 1) / chunk_rows;
  const long grid_y = std::max(
      1L,
      std::min({chunks, (long(p.sms) * occ + grid_x - 1) / grid_x, 65535L}));
  const dim3 grid(grid_x, grid_y), block(tx, ty);
  auto main_only = [&] {
    CHECK(cudaMemsetAsync(p.counters, 0, grid_x * sizeof(unsigned long long)));
    kernel<<<grid, block>>>(p.g, p.x, p.w, p.gx, p.partial, p.rows, p.cols,
                            p.counters, chunk_rows);
  };
  report_finished(p, label, occ, grid_x, grid_y, main_only);
}

template <typename T>
void release(Problem<T>& p) {
  CHECK(cudaFree(p.g));
  CHECK(cudaFree(p.x));
  CHECK(cudaFree(p.w));
  CHECK(cudaFree(p.gx));
  CHECK(cudaFree(p.gw));
  CHECK(cudaFree(p.partial));
  CHECK(cudaFree(p.partial2));
  CHECK(cudaFree(p.counters));
}

// stream_dynamic over one wave of `blocks`, the counter reset before each call.
template <typename T, int kUnroll>
void stream_dynamic_case(const char* label, Problem<T>& p, long nvec,
                         long blocks, long chunk) {
  const float ms = back_to_back_ms([&] {
    CHECK(cudaMemsetAsync(p.counters, 0, sizeof(unsigned long long)));
    stream_dynamic<T, kUnroll>
        <<<blocks, 256>>>(p.x, p.gx, nvec, p.counters, chunk);
  });
  std::printf("  %-44s %.4f ms %5.1f%% (its own bytes: %5.1f%%)\n", label, ms,
              100 * p.bytes / ms / 1e6 / p.copy,
              100 * 2.0 * nvec * kV<T> * sizeof(T) / ms / 1e6 / p.copy);
}

// stream_bulk with kStages stages of stage_bytes, `per_sm` blocks per SM.
template <typename T, int kStages, bool kBulkStore, bool kDynamic>
void stream_bulk_case(Problem<T>& p, long n, int stage_bytes, int per_sm) {
  auto kernel = stream_bulk<T, kStages, kBulkStore, kDynamic>;
  const int smem = kStages * stage_bytes;
  const int occ = bulk_occupancy(kernel, smem, per_sm);
  const long blocks = long(p.sms) * occ;
  const float ms = back_to_back_ms([&] {
    if (kDynamic)
      CHECK(cudaMemsetAsync(p.counters, 0, sizeof(unsigned long long)));
    kernel<<<blocks, 256, smem>>>(p.x, p.gx, n, stage_bytes, p.counters);
  });
  CHECK(cudaGetLastError());
  char label[96];
  std::snprintf(label, sizeof label, "stream, bulk %dx%d KB, %d/SM%s%s",
                kStages, stage_bytes / 1024, occ,
                kBulkStore ? ", bulk store" : "", kDynamic ? ", dynamic" : "");
  double err = 0;
  if (p.check) {  // gx == 2x
    const auto xs = to_host(p.x, n), gxs = to_host(p.gx, n);
    for (long i = 0; i < n; ++i)
      err = std::max(err, double(std::fabs(gxs[i] - 2 * xs[i])));
  }
  std::printf("  %-44s %.4f ms %5.1f%% (its own bytes: %5.1f%%)  max err %.1e\n",
              label, ms, 100 * p.bytes / ms / 1e6 / p.copy,
              100 * 2.0 * n * sizeof(T) / ms / 1e6 / p.copy, err);
}

// per_feature_bulk with kStages stages of about stage_bytes each (whole rows
// of the block's column span), `per_sm` blocks per SM in one wave.
template <typename T, int kStages, bool kDynamic>
void run_bulk(Problem<T>& p, int stage_bytes, int per_sm) {
  auto kernel = per_feature_bulk<T, kStages, kDynamic>;
  const long vcols = p.cols / kV<T>;
  const int tw = int(std::min(vcols, 256L));
  const int ty = 256 / tw;
  const long grid_x = vcols / tw;
  const int row_bytes = tw * 16;
  const int stage_rows = std::max(1, stage_bytes / row_bytes);
  const int smem = kStages * stage_rows * row_bytes;
  const int occ = bulk_occupancy(kernel, smem, per_sm);
  const long chunks = (p.rows + stage_rows - 1) / stage_rows;
  const long grid_y = std::max(
      1L, std::min({chunks, (long(p.sms) * occ + grid_x - 1) / grid_x, 65535L}));
  const dim3 grid(grid_x, grid_y), block(tw, ty);
  auto main_only = [&] {
    if (kDynamic)
      CHECK(cudaMemsetAsync(p.counters, 0, grid_x * sizeof(unsigned long long)));
    kernel<<<grid, block, smem>>>(p.g, p.x, p.w, p.gx, p.partial, p.rows,
                                  p.cols, stage_rows, p.counters);
  };
  char label[96];
  std::snprintf(label, sizeof label, "bulk %dx%d rows (%d KB)%s", kStages,
                stage_rows, stage_rows * row_bytes / 1024,
                kDynamic ? ", dynamic" : "");
  report_finished(p, label, occ, grid_x, grid_y, main_only);
}

template <typename T>
void shape(const char* name, long rows, long cols, int sms, double copy,
           bool check, const std::string& mode) {
  const bool streams = mode == "--streams";
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
  CHECK(cudaMalloc(&p.partial2, 1024L * cols * sizeof(float)));
  CHECK(cudaMalloc(&p.counters, (cols + 1) * sizeof(unsigned long long)));
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
  if (mode == "--dynamic") {
    const long nvec = n / kV<T>;
    const long all = (nvec + 255) / 256;
    const long wave = sms * 8L;
    if (check) {
      stream_case<T, 1, false>("stream x -> gx, grid-stride, 1 wave", p.x, p.gx,
                               n, std::min(all, wave), p.bytes, copy);
      stream_case<T, 1, false>("stream, grid-stride, 4 waves", p.x, p.gx, n,
                               std::min(all, 4 * wave), p.bytes, copy);
      stream_case<T, 1, false>("stream, a vector per thread", p.x, p.gx, n, all,
                               p.bytes, copy);
      for (long chunk : {1024L, 4096L, 16384L}) {
        char label[64];
        std::snprintf(label, sizeof label, "stream, dynamic chunks of %ld",
                      chunk);
        stream_dynamic_case<T, 1>(label, p, nvec, std::min(all, wave), chunk);
        std::snprintf(label, sizeof label,
                      "stream, dynamic chunks of %ld, 4 in flight", chunk);
        stream_dynamic_case<T, 4>(label, p, nvec, std::min(all, wave), chunk);
      }
    }
    run<T, 4, 1, false>(p, "library (4 rows in flight, strided)", tx, 0);
    run<T, 4, 1, false, true>(p, "lean, 16 rows per thread", tx, -16);
    run_dynamic<T, 4, 1>(p, "dynamic, chunks of 1 block step", tx);
    run_dynamic<T, 4, 4>(p, "dynamic, chunks of 4 block steps", tx);
    run_dynamic<T, 4, 16>(p, "dynamic, chunks of 16 block steps", tx);
    run_dynamic<T, 2, 4>(p, "dynamic, 2 in flight, chunks of 4 steps", tx);
    if (wide != tx)
      run_dynamic<T, 4, 4>(p, "dynamic, wide blocks, 4 steps", wide);
    release(p);
    return;
  }
  if (mode == "--bulk") {
    if (vcols % 256 != 0 && vcols > 256) {
      release(p);
      return;
    }
    if (check) {
      const long all = (n / kV<T> + 255) / 256;
      stream_case<T, 1, false>("stream, a vector per thread", p.x, p.gx, n, all,
                               p.bytes, copy);
      stream_case<T, 1, false>("stream, grid-stride, 4 waves", p.x, p.gx, n,
                               std::min(all, 4L * sms * 8), p.bytes, copy);
      stream_bulk_case<T, 4, false, false>(p, n, 16384, 2);
      stream_bulk_case<T, 4, false, true>(p, n, 16384, 2);
      stream_bulk_case<T, 8, false, false>(p, n, 8192, 2);
      stream_bulk_case<T, 4, false, false>(p, n, 32768, 1);
      stream_bulk_case<T, 3, false, false>(p, n, 16384, 4);
      stream_bulk_case<T, 4, true, false>(p, n, 16384, 2);
      stream_bulk_case<T, 4, true, true>(p, n, 16384, 2);
    }
    run<T, 4, 1, false>(p, "library (4 rows in flight, strided)", tx, 0);
    run_bulk<T, 4, false>(p, 16384, 2);
    run_bulk<T, 4, true>(p, 16384, 2);
    run_bulk<T, 8, false>(p, 8192, 2);
    run_bulk<T, 8, true>(p, 8192, 2);
    run_bulk<T, 4, false>(p, 32768, 1);
    run_bulk<T, 3, true>(p, 16384, 4);
    release(p);
    return;
  }
  if (check && streams) {  // the 1:1 read-write stream's own ceiling
    const long all = (n / kV<T> + 255) / 256;
    const long wave = sms * 8L;
    stream_case<T, 1, false>("stream x -> gx, grid-stride, 4 waves", p.x, p.gx,
                             n, std::min(all, 4 * wave), p.bytes, copy);
    stream_case<T, 1, false>("stream, grid-stride, 32 waves", p.x, p.gx, n,
                             std::min(all, 32 * wave), p.bytes, copy);
    stream_case<T, 1, false>("stream, a vector per thread", p.x, p.gx, n, all,
                             p.bytes, copy);
    stream_case<T, 4, false>("stream, 4 in flight, 1 wave", p.x, p.gx, n,
                             std::min(all, wave), p.bytes, copy);
    stream_case<T, 4, false>("stream, 4 in flight, 4 waves", p.x, p.gx, n,
                             std::min(all, 4 * wave), p.bytes, copy);
    stream_case<T, 1, true>("stream, a vector per thread, .cs stores", p.x,
                            p.gx, n, all, p.bytes, copy);
    stream_case<T, 4, true>("stream, 4 in flight, 4 waves, .cs stores", p.x,
                            p.gx, n, std::min(all, 4 * wave), p.bytes, copy);
  }
  run<T, 4, 1, false>(p, "library (4 rows in flight, strided)", tx, 0);
  run<T, 4, 1, false, true>(p, "lean, 1 wave", tx, 1);
  run<T, 4, 1, false, true>(p, "lean, 4 rows per thread", tx, -4);
  run<T, 4, 1, false, true>(p, "lean, 8 rows per thread", tx, -8);
  run<T, 4, 1, false, true>(p, "lean, 16 rows per thread", tx, -16);
  run<T, 4, 1, false, true>(p, "lean, 32 rows per thread", tx, -32);
  run<T, 4, 1, false, true>(p, "lean, 64 rows per thread", tx, -64);
  run<T, 2, 1, false, true>(p, "lean, 2 in flight, 8 rows per thread", tx, -8);
  run<T, 2, 1, false, true>(p, "lean, 2 in flight, 16 rows per thread", tx,
                            -16);
  run<T, 4, 1, false, true>(p, "lean, 16 rows per thread, finish 8 cols", tx,
                            -16, 8);
  if (wide != tx) {
    run<T, 4, 1, false, true>(p, "wide blocks, 16 rows per thread", wide, -16);
    run<T, 4, 1, false, true>(p, "wide blocks, 64 rows per thread", wide, -64);
  }
  release(p);
}

int main(int argc, char** argv) {
  // --streams: also time the plain read-x-write-gx kernels once per shape;
  // --dynamic: the dynamically assigned variants against the library's.
  const std::string mode = argc > 1 ? argv[1] : "";
  int sms;
  const double copy = device_and_copy(&sms);
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::printf("== repeat %d\n", repeat);
    const bool check = repeat == 0;
    shape<float>("fp32", 1048576, 128, sms, copy, check, mode);
    shape<float>("fp32", 4096, 65536, sms, copy, check, mode);
    shape<__nv_bfloat16>("bf16", 1048576, 128, sms, copy, check, mode);
    shape<__nv_bfloat16>("bf16", 4096, 65536, sms, copy, check, mode);
    shape<float>("fp32", 65536, 1024, sms, copy, check, mode);
  }
  return 0;
}
