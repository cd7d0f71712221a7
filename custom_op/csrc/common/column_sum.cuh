// A deterministic sum over rows: out[j] = sum of partial[:, j], in an order
// fixed by the shape. A backward that sums a weight's gradient over rows
// writes one partial row per block (each block its own rows, in order), then
// calls launch_column_sum: no atomics, the same bits on every run.
#pragma once

#include <cstdint>

#include "cuda_utils.cuh"
#include "dispatch.h"

namespace custom_op::cuda {

// A block takes 32 columns (coalesced reads) and spreads the partial rows
// over 32 threads per column, then sums the 32 threads' sums in order.
constexpr int kColumnSumColumns = 32;
constexpr int kColumnSumParts = 32;

template <typename T>
__global__ void __launch_bounds__(kColumnSumColumns* kColumnSumParts)
    column_sum_kernel(const acc_t<T>* __restrict__ partial, T* __restrict__ out,
                      int64_t parts, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A sums[kColumnSumParts][kColumnSumColumns + 1];  // no conflicts
  const int64_t j = int64_t(blockIdx.x) * kColumnSumColumns + threadIdx.x;
  A s = 0;
  if (j < cols) {
    for (int64_t p = threadIdx.y; p < parts; p += kColumnSumParts) {
      s += partial[p * cols + j];
    }
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  A total = 0;
#pragma unroll
  for (int y = 0; y < kColumnSumParts; ++y) total += sums[y][threadIdx.x];
  out[j] = static_cast<T>(total);
}

// out[j] = sum over the `parts` rows of partial[parts, cols], in T.
template <typename T>
void launch_column_sum(const acc_t<T>* partial, T* out, int64_t parts,
                       int64_t cols, cudaStream_t stream) {
  column_sum_kernel<T><<<unsigned(ceil_div(cols, kColumnSumColumns)),
                         dim3(kColumnSumColumns, kColumnSumParts), 0, stream>>>(
      partial, out, parts, cols);
  CUSTOM_OP_CHECK_LAUNCH("column_sum_kernel");
}

}  // namespace custom_op::cuda
