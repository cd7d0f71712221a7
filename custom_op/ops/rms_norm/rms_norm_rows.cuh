// How rms_norm's kernels spread a row over a block, shared by the forward
// (rms_norm_cuda.cu) and the backward (rms_norm_backward_cuda.cu).
//
// A block takes a whole row (H = x.shape[-1] elements), each thread the
// vectors threadIdx.x, threadIdx.x + blockDim.x, ... of it: 16-byte vectors
// when H and the pointers allow, else single elements, so any H works. A row
// of up to `items` vectors a thread stays in registers between the pass that
// sums over it and the pass that writes it; a longer one is read twice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/tensor_utils.h"
#include "common/vec.cuh"

namespace custom_op::cuda::rms_norm_rows {

// Threads per block: at most 512, with several vectors per thread rather
// than more threads: small blocks keep more rows in flight per
// multiprocessor.
constexpr int kMaxThreads = 512;
// A plan's items for a row too long for registers: it is read twice.
constexpr int kReadTwice = 0;

// This thread's vectors of a row are at offsets first + i * stride (first =
// threadIdx.x * kVecN, stride = blockDim.x * kVecN); this many of the first
// kItems lie within a row of vcols vectors, the same for every row.
template <int kItems>
__device__ __forceinline__ int thread_items(int64_t vcols) {
  const int64_t n = (vcols - threadIdx.x + blockDim.x - 1) / blockDim.x;
  return n < 0 ? 0 : n > kItems ? kItems : int(n);
}

// How a row is spread over a block: `items` vectors per thread (kReadTwice:
// the row is read twice), `threads` a multiple of 32.
struct RowPlan {
  int items;
  int threads;
};

// `target` vectors per thread (fewer for rows of less than 32 * target), more
// up to max_items where 512 threads would not cover the row; past that, the
// row is read twice.
inline RowPlan plan_row(int64_t vcols, int target, int max_items) {
  int items = 1;
  while (items < target && items * 32 < vcols) items *= 2;
  while (items < max_items && items * int64_t(kMaxThreads) < vcols) items *= 2;
  const int64_t threads = ceil_div(ceil_div(vcols, items), 32) * 32;
  if (threads > kMaxThreads) return {kReadTwice, kMaxThreads};
  return {items, int(std::max<int64_t>(32, threads))};
}

// Calls launch(std::integral_constant<int, items>()) for items of 1, 2, 4 or 8
// up to kMaxItems (the kernel's template argument), else with kReadTwice.
template <int kMaxItems, typename Launch>
void dispatch_items(int items, const Launch& launch) {
  using std::integral_constant;
  if (items == 1) return launch(integral_constant<int, 1>());
  if constexpr (kMaxItems >= 2) {
    if (items == 2) return launch(integral_constant<int, 2>());
  }
  if constexpr (kMaxItems >= 4) {
    if (items == 4) return launch(integral_constant<int, 4>());
  }
  if constexpr (kMaxItems >= 8) {
    if (items == 8) return launch(integral_constant<int, 8>());
  }
  launch(integral_constant<int, kReadTwice>());
}

// 16-byte vectors when every row starts 16-byte aligned.
template <typename T>
bool use_vectors(RowView v, std::initializer_list<const void*> pointers) {
  if (v.cols % kVec16<T> != 0) return false;
  return std::all_of(pointers.begin(), pointers.end(), is_aligned16);
}

// Where a launch runs: the device's properties and PyTorch's current stream.
struct LaunchAt {
  const DeviceInfo& info;
  int device;
  cudaStream_t stream;
};

}  // namespace custom_op::cuda::rms_norm_rows
