// What a row-wise CUDA kernel (a norm, a softmax, a loss over the last
// dimension) is built from, in one include: sums across threads (here),
// 16-byte vector access (vec.cuh) and the [rows, cols] view of a tensor
// (tensor_utils.h).
//
//   warp_sum(v)          sum of v over the 32 lanes of a warp, in every lane
//   block_sum(v)         sum of v over a 1-D block, in every thread (blockDim.x
//                        a multiple of 32, up to 1024)
//   warp_reduce(v, op), block_reduce(v, op, identity)   the same for any
//                        associative op(a, b) (softmax.cuh merges online-
//                        softmax pieces with them); a struct V shuffles
//                        through a specialization of Shuffle<V>
// Every lane of the warp calls the warp's, every thread of the block the
// block's (it synchronizes the block: no early return before it).
//   Vec<T, N>            N elements of T moved by one load or store
//   kVec16<T>            elements of T in 16 bytes (the widest access)
//   is_aligned16(p)      whether p allows 16-byte access
//   load_vec<T, N>(p), store_vec(p, v)      one vector access (store_vec:
//                        global memory only)
//   load_vec_evict<Evict::kFirst|kLast, T, N>(p)  a load with an L2 hint
//                        (16-byte vectors; others load plainly)
//   RowView rows_of(t)   t seen as [rows, cols], cols = t.shape[-1] (host)
//
// The sums add in an order fixed by the lane and warp indices: the same bits
// on every run. Typical use, one block per row:
//   acc = 0; for (c = threadIdx.x; c < vcols; c += blockDim.x) acc += ...;
//   const float total = block_sum(acc);  // every thread has it
#pragma once

#include "tensor_utils.h"
#include "vec.cuh"

namespace custom_op::cuda {

// How warp_reduce moves a V between lanes: one shuffle, for a scalar.
template <typename V>
struct Shuffle {
  __device__ __forceinline__ static V xor_lane(V v, int offset) {
    return __shfl_xor_sync(0xffffffffu, v, offset);
  }
};

template <typename V, typename Op>
__device__ __forceinline__ V warp_reduce(V v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v = op(v, Shuffle<V>::xor_lane(v, offset));
  }
  return v;
}

// Each warp's result goes to shared memory; then every warp reads them all
// and reduces them itself, so the total reaches every thread without a third
// barrier. The last barrier lets the next call reuse the shared slots.
template <typename V, typename Op>
__device__ __forceinline__ V block_reduce(V v, Op op, V identity) {
  __shared__ V warp_results[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  V total = lane < int(blockDim.x / 32) ? warp_results[lane] : identity;
  total = warp_reduce(total, op);
  __syncthreads();
  return total;
}

struct Add {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  return warp_reduce(v, Add{});
}

template <typename A>
__device__ __forceinline__ A block_sum(A v) {
  return block_reduce(v, Add{}, A(0));
}

}  // namespace custom_op::cuda
