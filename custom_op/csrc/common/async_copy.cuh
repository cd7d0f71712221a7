// Copies from global to shared memory that run while the thread computes
// (cp.async, sm_80 and up; older GPUs copy at once, through registers).
//
//   copy16_async(smem, gmem)   16 bytes, both addresses 16-byte aligned
//   copy_async_commit()        closes a group of the thread's copies
//   copy_async_wait<N>()       waits until at most N of its groups are open
//
// A thread sees its own copies once their group is waited for; other threads
// see them only after a barrier, so a kernel where each thread reads back
// what it copied needs none.
#pragma once

#include <cstdint>

namespace custom_op::cuda {

__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto to = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // .cg: the data is read once, so it bypasses L1.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(gmem)
               : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}

__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

}  // namespace custom_op::cuda
