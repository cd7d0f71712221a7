// Hopper's bulk asynchronous copy (cp.async.bulk, the 1-D form of the tensor
// memory accelerator) into shared memory, completed on an mbarrier, for the
// standalone experiments: a block keeps kStages chunks of its input in flight
// without holding them in registers. sm_90 and newer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "standalone.cuh"  // CHECK

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// One arrival per phase: the thread that issues a stage's copies.
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)));
}

// Makes the initialised barriers visible to the async proxy.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrives and expects `bytes` more of copies to land in this phase.
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar,
                                                   unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
          smem_u32(bar)),
      "r"(bytes)
      : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar))
               : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// global -> shared, `bytes` a multiple of 16, both addresses 16-byte aligned.
__device__ __forceinline__ void bulk_load(void* dst, const void* src,
                                          unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

// shared -> global, then the group's commit; wait_bulk_reads<N> returns once
// at most N committed groups still read their shared memory.
__device__ __forceinline__ void bulk_store(void* dst, const void* src,
                                           unsigned bytes) {
  asm volatile(
      "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
      "r"(smem_u32(src)), "r"(bytes)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wait_bulk_reads() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

template <int N>
__device__ __forceinline__ void wait_bulk_writes() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// Shared-memory writes of the threads, visible to a following bulk store.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// A block's chunks through kStages shared-memory stages of stage_bytes each.
// The block's first thread takes chunk ids from next() (negative: none left),
// issues each one's copies with issue(chunk, stage, barrier), which must
// arrive on the barrier with the bytes it expects, and every thread runs
// consume(chunk, stage) once the chunk has landed; the stage is refilled after
// a barrier, so kStages - 1 chunks stay in flight while one is consumed.
// next() must be increasing: the first chunk id it refuses ends the loop.
template <int kStages, class Next, class Issue, class Consume>
__device__ __forceinline__ void bulk_pipeline(char* stages, int stage_bytes,
                                              Next next, Issue issue,
                                              Consume consume) {
  __shared__ uint64_t bar[kStages];
  __shared__ long chunk_of[kStages];
  const bool lead = threadIdx.x == 0 && threadIdx.y == 0;
  auto refill = [&](int s) {
    const long c = next();
    chunk_of[s] = c;
    if (c >= 0) {
      issue(c, stages + long(s) * stage_bytes, &bar[s]);
    } else {
      mbar_arrive(&bar[s]);  // completes the phase: the consumers see -1
    }
  };
  if (lead) {
    for (int s = 0; s < kStages; ++s) mbar_init(&bar[s]);
    mbar_init_fence();
  }
  __syncthreads();
  if (lead)
    for (int s = 0; s < kStages; ++s) refill(s);
  for (long k = 0;; ++k) {
    const int s = int(k % kStages);
    mbar_wait(&bar[s], unsigned(k / kStages) & 1u);
    const long c = chunk_of[s];
    if (c < 0) break;
    consume(c, stages + long(s) * stage_bytes);
    __syncthreads();  // every thread is done with stage s
    if (lead) refill(s);
  }
}

// Resident blocks of 256 threads per SM (at most `want`) of a kernel with
// `smem` bytes of dynamic shared memory, after allowing it that much.
template <typename K>
int bulk_occupancy(K kernel, int smem, int want) {
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem));
  int occ;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 256, smem));
  return std::min(occ, want);
}
