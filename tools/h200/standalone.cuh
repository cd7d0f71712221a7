// Shared by the standalone kernel experiments in tools/h200/*.cu: error
// checks, 16-byte vectors, float <-> T conversions, a hash fill with every
// mantissa bit random (as torch.randn's data), and back-to-back timing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                          \
  do {                                                    \
    cudaError_t e = (x);                                  \
    if (e != cudaSuccess) {                               \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                       \
    }                                                     \
  } while (0)

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__host__ __device__ float to_f(float v) { return v; }
__host__ __device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ T from_f(float v);
template <>
__device__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

template <typename T>
__global__ void fill(T* p, long n, unsigned seed) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = from_f<T>(__uint_as_float(0x3f800000u | (h & 0x7fffffu)) - 1.5f);
  }
}

// n device values of T, copied to the host as floats.
template <typename T>
std::vector<float> to_host(const T* d, long n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (long i = 0; i < n; ++i) f[i] = to_f(h[i]);
  return f;
}

// Back-to-back launches, an event pair around each, as `python -m bench` times
// a call: no synchronization between launches, so each one also pays for what
// the previous left behind. Median per launch.
template <typename F>
float back_to_back_ms(F launch, int warmup = 10, int reps = 50) {
  std::vector<cudaEvent_t> a(reps), b(reps);
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventCreate(&a[i]));
    CHECK(cudaEventCreate(&b[i]));
  }
  for (int i = 0; i < warmup; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a[i]));
    launch();
    CHECK(cudaEventRecord(b[i]));
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventElapsedTime(&t[i], a[i], b[i]));
    CHECK(cudaEventDestroy(a[i]));
    CHECK(cudaEventDestroy(b[i]));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The ceiling: a 1 GiB device-to-device copy, bytes read + written per
// millisecond as `time_ms` (a timer such as back_to_back_ms) measures it.
template <typename Timer>
double copy_gbps(Timer time_ms) {
  const long n = 1L << 28;
  float *a, *b;
  CHECK(cudaMalloc(&a, n * 4));
  CHECK(cudaMalloc(&b, n * 4));
  CHECK(cudaMemset(a, 1, n * 4));
  const float ms = time_ms(
      [&] { CHECK(cudaMemcpyAsync(b, a, n * 4, cudaMemcpyDeviceToDevice)); });
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * n * 4 / ms / 1e6;
}

// The device's multiprocessor count and its copy bandwidth timed back-to-back
// (the ceiling every variant is compared with), printed as the first line.
inline double device_and_copy(int* sms) {
  CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, 0));
  const double copy =
      copy_gbps([](auto launch) { return back_to_back_ms(launch); });
  std::printf("%d SMs, copy back-to-back %.0f GB/s (the ceiling below)\n", *sms,
              copy);
  return copy;
}
