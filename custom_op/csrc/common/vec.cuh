// 16-byte vector access for the CUDA kernels.
#pragma once

#include <cstdint>

#include "dispatch.h"

namespace custom_op::cuda {

// N elements of T loaded or stored with one instruction (N * sizeof(T) <= 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements of T in one 16-byte access.
template <typename T>
constexpr int kVec16 = 16 / sizeof(T);

inline bool is_aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

// Where a load's line should stay in L1 and L2: evicted first (data read
// once) or last (data every block rereads), as Triton's kernels load them.
enum class Evict { kFirst, kLast };

// A load with an eviction priority: 16-byte vectors on sm_80 and up; other
// widths, and older GPUs (no L2 cache policies), load plainly, so a kernel
// written for any vector width can ask for it. Only for memory the kernel
// does not write: the asm declares no memory dependence, so the compiler may
// move it past stores.
template <Evict kEvict, typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec_evict(const T* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) * N == 16) {
    uint4 v;
    uint64_t policy;
    if constexpr (kEvict == Evict::kFirst) {
      asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
          : "=l"(policy));
      asm("ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, "
          "[%4], %5;"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p), "l"(policy));
    } else {
      asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
      asm("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, "
          "[%4], %5;"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p), "l"(policy));
    }
    Vec<T, N> out;
    __builtin_memcpy(&out, &v, sizeof(v));
    return out;
  }
#endif
  return load_vec<T, N>(p);
}

// Elements i .. i + N of a gradient read through a GradView: step 1, a
// vector load; step 0, its one value repeated.
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_grad(const T* p, int64_t i,
                                               int64_t step) {
  if (step == 0) {
    Vec<T, N> v;
    const T g = p[0];
#pragma unroll
    for (int k = 0; k < N; ++k) v.v[k] = g;
    return v;
  }
  return load_vec<T, N>(p + i);
}

// The same with an eviction priority (load_vec_evict's).
template <Evict kEvict, typename T, int N>
__device__ __forceinline__ Vec<T, N> load_grad_evict(const T* p, int64_t i,
                                                     int64_t step) {
  if (step == 0) return load_grad<T, N>(p, i, step);
  return load_vec_evict<kEvict, T, N>(p + i);
}

// p: global memory (a tensor's data). A 16-byte vector is written with one
// st.global.v4: as a struct store, NVVM split all but the first of an unrolled
// loop's stores into four 4-byte ones.
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) * N == 16) {
    uint4 b;
    __builtin_memcpy(&b, &v, sizeof(b));
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(b.x),
                 "r"(b.y), "r"(b.z), "r"(b.w)
                 : "memory");
    return;
  }
#endif
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

}  // namespace custom_op::cuda
