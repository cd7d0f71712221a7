// Online-softmax pieces (softmax.h's SoftmaxSum) merged across a block:
//   block_softmax_merge(s)  every thread's piece of a 1-D block merged, in
//                           every thread (reduce.cuh's block_reduce: blockDim.x
//                           a multiple of 32, up to 1024; it synchronizes the
//                           block: no early return before it)
// Pieces merge in an order fixed by the lane and warp indices, and merging is
// commutative bit for bit: the same bits on every run.
#pragma once

#include "reduce.cuh"
#include "softmax.h"

namespace custom_op::cuda {

template <typename A>
struct Shuffle<SoftmaxSum<A>> {
  __device__ __forceinline__ static SoftmaxSum<A> xor_lane(SoftmaxSum<A> s,
                                                           int offset) {
    return {__shfl_xor_sync(0xffffffffu, s.max, offset),
            __shfl_xor_sync(0xffffffffu, s.sum, offset)};
  }
};

struct Merge {
  template <typename A>
  __device__ __forceinline__ SoftmaxSum<A> operator()(SoftmaxSum<A> a,
                                                      SoftmaxSum<A> b) const {
    return merge(a, b);
  }
};

template <typename A>
__device__ __forceinline__ SoftmaxSum<A> block_softmax_merge(SoftmaxSum<A> s) {
  return block_reduce(s, Merge{}, SoftmaxSum<A>::empty());
}

}  // namespace custom_op::cuda
