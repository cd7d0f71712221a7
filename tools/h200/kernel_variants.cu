// Launch-shape experiments for the memory-bound kernels on one GPU, outside
// PyTorch: elementwise y = w * x^2 (grid-stride with several wave caps vs one
// vector per thread, cache hints) and the short-row reduction s[r] = sum_j w[j]
// x[r,j]^2 (lanes per row), each timed synchronized after every launch and
// back-to-back. Prints the percent of the device-to-device copy bandwidth
// (back-to-back) measured in the same run, for the bytes that must move.
//
//   nvcc -O3 -arch=sm_90 -o /tmp/kv tools/h200/kernel_variants.cu && /tmp/kv
#include "standalone.cuh"

// Elementwise, grid-stride; kUnroll vectors per thread per step, loads issued
// first; kStream: streaming (evict-first) stores of the output; kStreamLoads:
// streaming loads.
template <typename T, int kUnroll, bool kStream = false,
          bool kStreamLoads = false>
__global__ void __launch_bounds__(256)
    square_stride(const T* __restrict__ x, const T* __restrict__ w,
                  T* __restrict__ y, long n) {
  constexpr int V = 16 / sizeof(T);
  using Vt = Vec<T, V>;
  const long nvec = n / V;
  const long stride = (long)gridDim.x * blockDim.x * kUnroll;
  for (long base = ((long)blockIdx.x * blockDim.x * kUnroll) + threadIdx.x;
       base < nvec; base += stride) {
    Vt xv[kUnroll], wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      long v = base + (long)u * blockDim.x;
      if (v < nvec) {
        if constexpr (kStreamLoads) {
          *reinterpret_cast<float4*>(&xv[u]) =
              __ldcs(reinterpret_cast<const float4*>(x) + v);
          *reinterpret_cast<float4*>(&wv[u]) =
              __ldcs(reinterpret_cast<const float4*>(w) + v);
        } else {
          xv[u] = reinterpret_cast<const Vt*>(x)[v];
          wv[u] = reinterpret_cast<const Vt*>(w)[v];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      long v = base + (long)u * blockDim.x;
      if (v < nvec) {
        Vt yv;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          float xf = to_f(xv[u].v[k]);
          yv.v[k] = from_f<T>(to_f(wv[u].v[k]) * xf * xf);
        }
        if constexpr (kStream) {
          __stcs(reinterpret_cast<float4*>(y) + v,
                 *reinterpret_cast<const float4*>(&yv));
        } else {
          reinterpret_cast<Vt*>(y)[v] = yv;
        }
      }
    }
  }
}

// Short rows: kGroup lanes per row.
template <typename T, int kGroup>
__global__ void __launch_bounds__(256)
    rows_group(const T* __restrict__ x, const T* __restrict__ w,
               T* __restrict__ out, long rows, long cols) {
  constexpr int V = 16 / sizeof(T);
  using Vt = Vec<T, V>;
  constexpr int kRowsPerBlock = 256 / kGroup;
  const int lane = threadIdx.x % kGroup;
  const long vcols = cols / V;
  for (long r0 = (long)blockIdx.x * kRowsPerBlock; r0 < rows;
       r0 += (long)gridDim.x * kRowsPerBlock) {
    long r = r0 + threadIdx.x / kGroup;
    float acc = 0;
    if (r < rows) {
      const Vt* xr = reinterpret_cast<const Vt*>(x + r * cols);
      const Vt* wr = reinterpret_cast<const Vt*>(w);
#pragma unroll 4
      for (long c = lane; c < vcols; c += kGroup) {
        Vt xv = xr[c], wv = wr[c];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          float xf = to_f(xv.v[k]);
          acc += to_f(wv.v[k]) * xf * xf;
        }
      }
    }
    for (int o = kGroup / 2; o > 0; o /= 2)
      acc += __shfl_xor_sync(0xffffffffu, acc, o, kGroup);
    if (r < rows && lane == 0) out[r] = from_f<T>(acc);
  }
}

template <typename F>
float median_ms(F launch, int reps = 40) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) launch();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename T>
void elementwise(const char* name, long n, int sms, double copy) {
  T *x, *w, *y;
  CHECK(cudaMalloc(&x, n * sizeof(T)));
  CHECK(cudaMalloc(&w, n * sizeof(T)));
  CHECK(cudaMalloc(&y, n * sizeof(T)));
  fill<<<(n + 255) / 256, 256>>>(x, n, 1);
  fill<<<(n + 255) / 256, 256>>>(w, n, 2);
  const long nvec = n / (16 / sizeof(T));
  const long resident = (long)sms * 8;
  const double bytes = 3.0 * n * sizeof(T);
  // Synchronized after each launch (as the first probes timed) and back-to-back
  // (as the benchmark times), for each launch shape and cache hint.
  auto run = [&](const char* variant, long grid, int threads, auto launch) {
    const float sync_ms = median_ms(launch),
                b2b_ms = back_to_back_ms(launch, 5, 40);
    std::printf(
        "square %-5s n=2^%-2d %-34s grid %7ldx%-3d synchronized %.4f ms "
        "%5.1f%%  back-to-back %.4f ms %5.1f%%\n",
        name, 63 - __builtin_clzl(n), variant, grid, threads, sync_ms,
        100 * bytes / sync_ms / 1e6 / copy, b2b_ms,
        100 * bytes / b2b_ms / 1e6 / copy);
  };
  const long full = (nvec + 255) / 256;
  const long grid32 = std::min(full, resident * 32);
  run("one vector per thread", full, 256,
      [&] { square_stride<T, 1><<<full, 256>>>(x, w, y, n); });
  run("stride, 32 waves (library)", grid32, 256,
      [&] { square_stride<T, 1><<<grid32, 256>>>(x, w, y, n); });
  run("stride, 4 waves", std::min(full, resident * 4), 256, [&] {
    square_stride<T, 1><<<std::min(full, resident * 4), 256>>>(x, w, y, n);
  });
  run("2 vectors per thread", (full + 1) / 2, 256,
      [&] { square_stride<T, 2><<<(full + 1) / 2, 256>>>(x, w, y, n); });
  run("2 vectors per thread, 128 threads", full, 128,
      [&] { square_stride<T, 2><<<full, 128>>>(x, w, y, n); });
  run("4 vectors per thread", (full + 3) / 4, 256,
      [&] { square_stride<T, 4><<<(full + 3) / 4, 256>>>(x, w, y, n); });
  run("32 waves, streaming stores", grid32, 256,
      [&] { square_stride<T, 1, true><<<grid32, 256>>>(x, w, y, n); });
  run("32 waves, streaming loads", grid32, 256,
      [&] { square_stride<T, 1, false, true><<<grid32, 256>>>(x, w, y, n); });
  run("one vector per thread, streaming st", full, 256,
      [&] { square_stride<T, 1, true><<<full, 256>>>(x, w, y, n); });
  run("2 vectors, 128 threads, streaming st", full, 128,
      [&] { square_stride<T, 2, true><<<full, 128>>>(x, w, y, n); });
  CHECK(cudaFree(x));
  CHECK(cudaFree(w));
  CHECK(cudaFree(y));
}

template <typename T>
void reduction(const char* name, long rows, long cols, int sms, double copy) {
  T *x, *w, *out;
  const long n = rows * cols;
  CHECK(cudaMalloc(&x, n * sizeof(T)));
  CHECK(cudaMalloc(&w, cols * sizeof(T)));
  CHECK(cudaMalloc(&out, rows * sizeof(T)));
  fill<<<(n + 255) / 256, 256>>>(x, n, 3);
  fill<<<(cols + 255) / 256, 256>>>(w, cols, 4);
  const double bytes = (double)(n + cols + rows) * sizeof(T);
  const long cap = (long)sms * 8 * 32;
  auto run = [&](int group) {
    long grid = std::min(cap, (rows + 256 / group - 1) / (256 / group));
    auto launch = [&] {
      switch (group) {
        case 4:
          rows_group<T, 4><<<grid, 256>>>(x, w, out, rows, cols);
          break;
        case 8:
          rows_group<T, 8><<<grid, 256>>>(x, w, out, rows, cols);
          break;
        case 16:
          rows_group<T, 16><<<grid, 256>>>(x, w, out, rows, cols);
          break;
        default:
          rows_group<T, 32><<<grid, 256>>>(x, w, out, rows, cols);
          break;
      }
    };
    const float sync_ms = median_ms(launch),
                b2b_ms = back_to_back_ms(launch, 5, 40);
    std::printf(
        "sumsq  %-5s %ldx%-6ld %2d lanes per row  grid %7ld  synchronized %.4f "
        "ms %5.1f%%  back-to-back %.4f ms %5.1f%%\n",
        name, rows, cols, group, grid, sync_ms,
        100 * bytes / sync_ms / 1e6 / copy, b2b_ms,
        100 * bytes / b2b_ms / 1e6 / copy);
  };
  for (int g : {4, 8, 16, 32}) run(g);
  CHECK(cudaFree(x));
  CHECK(cudaFree(w));
  CHECK(cudaFree(out));
}

int main() {
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double copy =
      copy_gbps([](auto launch) { return back_to_back_ms(launch, 5, 40); });
  const double synchronized =
      copy_gbps([](auto launch) { return median_ms(launch); });
  std::printf(
      "%d SMs, copy back-to-back %.0f GB/s (the ceiling below), synchronized "
      "%.0f GB/s\n",
      sms, copy, synchronized);
  for (long n : {1L << 24, 1L << 27}) {
    elementwise<float>("fp32", n, sms, copy);
    elementwise<__nv_bfloat16>("bf16", n, sms, copy);
  }
  reduction<float>("fp32", 1048576, 128, sms, copy);
  reduction<__nv_bfloat16>("bf16", 1048576, 128, sms, copy);
  reduction<float>("fp32", 65536, 1024, sms, copy);
  reduction<__nv_bfloat16>("bf16", 65536, 1024, sms, copy);
  return 0;
}
