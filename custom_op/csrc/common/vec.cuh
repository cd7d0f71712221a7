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

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

// Sum over the `width` lanes of a group (width a power of two <= 32).
template <typename A>
__device__ __forceinline__ A group_sum(A v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset, width);
  }
  return v;
}

}  // namespace custom_op::cuda
