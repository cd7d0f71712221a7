// Online-softmax reductions for the CUDA kernels (softmax.h's SoftmaxSum):
//   warp_softmax_merge(s)   every lane's piece merged, in every lane
//   block_softmax_merge(s)  every thread's piece of a 1-D block merged, in
//                           every thread (blockDim.x a multiple of 32, up to
//                           1024; it synchronizes the block: no early return
//                           before it)
// Pieces merge in an order fixed by the lane and warp indices, and merging is
// commutative bit for bit: the same bits on every run.
#pragma once

#include "softmax.h"

namespace custom_op::cuda {

template <typename A>
__device__ __forceinline__ SoftmaxSum<A> warp_softmax_merge(SoftmaxSum<A> s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const SoftmaxSum<A> other{__shfl_xor_sync(0xffffffffu, s.max, offset),
                              __shfl_xor_sync(0xffffffffu, s.sum, offset)};
    s = merge(s, other);
  }
  return s;
}

// Each warp's piece goes to shared memory; every warp then merges them all
// itself, so the result reaches every thread without a third barrier. The
// last barrier lets the next call reuse the shared slots.
template <typename A>
__device__ __forceinline__ SoftmaxSum<A> block_softmax_merge(SoftmaxSum<A> s) {
  __shared__ A maxes[32];
  __shared__ A sums[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  s = warp_softmax_merge(s);
  if (lane == 0) {
    maxes[warp] = s.max;
    sums[warp] = s.sum;
  }
  __syncthreads();
  SoftmaxSum<A> total = SoftmaxSum<A>::empty();
  if (lane < int(blockDim.x / 32)) total = {maxes[lane], sums[lane]};
  total = warp_softmax_merge(total);
  __syncthreads();
  return total;
}

}  // namespace custom_op::cuda
