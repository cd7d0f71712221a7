// What a row-wise CUDA kernel (a norm, a softmax, a loss over the last
// dimension) is built from, in one include: sums across threads (here),
// 16-byte vector access (vec.cuh) and the [rows, cols] view of a tensor
// (tensor_utils.h).
//
//   warp_sum(v)          sum of v over the 32 lanes of a warp, in every lane
//   block_sum(v)         sum of v over a 1-D block, in every thread (blockDim.x
//                        a multiple of 32, up to 1024)
// Every lane of the warp calls warp_sum, every thread of the block block_sum
// (it synchronizes the block: no early return before it).
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

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Each warp's sum goes to shared memory; then every warp reads them all and
// sums them itself, so the total reaches every thread without a third
// barrier. The last barrier lets the next call reuse the shared slots.
template <typename A>
__device__ __forceinline__ A block_sum(A v) {
  __shared__ A warp_sums[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  A total = lane < int(blockDim.x / 32) ? warp_sums[lane] : A(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

}  // namespace custom_op::cuda
