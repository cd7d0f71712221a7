// How cross_entropy's CUDA kernels spread a row over a block, shared by the
// forward (cross_entropy_cuda.cu) and the backward
// (cross_entropy_backward_cuda.cu). A block takes a row (rows blockIdx.x,
// + gridDim.x, ...); a row is read in 16-byte vectors from its first 16-byte
// boundary, the few elements before and after it singly, so any V and any row
// start get vector loads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/cuda_utils.cuh"

namespace custom_op::cuda::cross_entropy_rows {

constexpr int kMaxThreads = 512;
// Vectors a thread loads before it uses them: several loads in flight.
constexpr int kUnroll = 4;
// The grid-stride grid caps at this many waves of resident blocks.
constexpr int64_t kMaxWaves = 32;

// A row of `cols` elements at p: `head` elements before its first 16-byte
// boundary, then `vecs` vectors of kVecN, then cols - head - vecs * kVecN
// elements (with kVecN == 1: no head, every element a vector).
struct RowSplit {
  int64_t head;
  int64_t vecs;
};

template <typename T, int kVecN>
__device__ __forceinline__ RowSplit split_row(const T* p, int64_t cols) {
  if constexpr (kVecN == 1) {
    return {0, cols};
  } else {
    const int64_t misaligned =
        int64_t(reinterpret_cast<uintptr_t>(p) % 16) / int64_t(sizeof(T));
    const int64_t to_boundary = (kVecN - misaligned) % kVecN;
    const int64_t head = to_boundary < cols ? to_boundary : cols;
    return {head, (cols - head) / kVecN};
  }
}

// The column of this thread's one element outside the vectors (the head,
// then the tail), or -1 if it has none.
__device__ __forceinline__ int64_t single_column(RowSplit s, int64_t cols,
                                                 int kVecN) {
  const int64_t t = threadIdx.x;
  if (t < s.head) return t;
  const int64_t tail = s.head + s.vecs * kVecN + (t - s.head);
  return tail < cols ? tail : -1;
}

// Threads per block: about kUnroll vectors each, a multiple of 32.
inline int threads_for(int64_t cols, int vec_n) {
  const int64_t vecs = ceil_div(cols, vec_n);
  const int64_t threads = ceil_div(ceil_div(vecs, kUnroll), 32) * 32;
  return int(std::clamp<int64_t>(threads, 32, kMaxThreads));
}

inline unsigned grid_for_rows(int64_t rows, int threads,
                              const DeviceInfo& info) {
  const int64_t resident =
      int64_t(info.sm_count) * std::max(1, info.max_threads_per_sm / threads);
  return static_cast<unsigned>(std::min(rows, resident * kMaxWaves));
}

}  // namespace custom_op::cuda::cross_entropy_rows
