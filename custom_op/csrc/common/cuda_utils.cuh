// CUDA helpers shared by every kernel launcher: error checks, the current
// stream, device properties and the launch geometry derived from them.
#pragma once

#include <cuda_runtime.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/headeronly/util/shim_utils.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace custom_op::cuda {

// Threads per block of every kernel here.
constexpr int kThreads = 256;

// Throws the error of `what` as a std::runtime_error. An error that means
// the library cannot run here (no kernel image for this GPU, PTX or runtime
// newer than the driver) names the GPU, what the library holds and the fix.
[[noreturn]] void throw_error(cudaError_t err, const char* what);

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_error(err, what);
}

#define CUSTOM_OP_CUDA_CHECK(expr) ::custom_op::cuda::check((expr), #expr)
// Launch errors (bad configuration, no kernel image for this GPU) surface at
// cudaGetLastError, not at the launch.
#define CUSTOM_OP_CHECK_LAUNCH(name) \
  ::custom_op::cuda::check(cudaGetLastError(), name)

// PyTorch's current stream on `device`: side streams and CUDA graph capture
// work because every kernel is launched on it.
inline cudaStream_t current_stream(int device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return static_cast<cudaStream_t>(stream);
}

// Threads one multiprocessor of the architecture being compiled holds (the
// CUDA programming guide's table; 11.x taken as 12.x's). __launch_bounds__
// asking more blocks than that is ignored with a ptxas warning. Host code
// sees 2048; only device code reads it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
constexpr int kMaxThreadsPerSm = 1024;
#elif defined(__CUDA_ARCH__) && \
    (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1100)
constexpr int kMaxThreadsPerSm = 1536;
#else
constexpr int kMaxThreadsPerSm = 2048;
#endif

// Blocks of `block` threads to ask __launch_bounds__ for: those that fill
// `threads` of a multiprocessor, or all it holds if fewer.
constexpr int min_blocks_per_sm(int threads, int block) {
  return (threads < kMaxThreadsPerSm ? threads : kMaxThreadsPerSm) / block;
}

struct DeviceInfo {
  int sm_count;
  int max_threads_per_sm;
  // Shared memory one block may have once its kernel opts in.
  int max_smem_per_block_optin;
  // The compute capability's major number (8 and up: cp.async, L2 hints).
  int major;
  // Blocks of kThreads resident on the whole device at once.
  int64_t resident_blocks() const {
    return int64_t(sm_count) * std::max(1, max_threads_per_sm / kThreads);
  }
};

// Read once per device and cached.
const DeviceInfo& device_info(int device);

// A grid-stride grid: enough blocks for `work_blocks` but no more than
// `waves` full waves of resident blocks, so a huge tensor reuses threads
// instead of launching millions of blocks.
inline unsigned int grid_for(int64_t work_blocks, const DeviceInfo& info,
                             int64_t waves = 32) {
  const int64_t cap = info.resident_blocks() * waves;
  return static_cast<unsigned int>(
      std::max<int64_t>(1, std::min(work_blocks, cap)));
}

// A grid of one block per `work_blocks`, up to the hardware's limit on
// gridDim.x (a grid-stride loop covers anything past it): for kernels whose
// threads each take one vector and nothing else, where the block scheduler's
// load balance beats threads that stride over many vectors.
inline unsigned int grid_for_each(int64_t work_blocks) {
  constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1;
  return static_cast<unsigned int>(
      std::clamp<int64_t>(work_blocks, 1, kMaxGridX));
}

// Resident blocks of `threads` threads (a multiple of 32, up to 1024) per
// multiprocessor for `kKernel` on `device` (its registers and shared memory
// decide), read once per kernel, device and block size (the kernel is a
// template argument, so kernels of one signature do not share a cache entry);
// with `dynamic_smem` bytes of dynamic shared memory a block, read each call.
template <auto kKernel>
int blocks_per_sm(int device, int threads, size_t dynamic_smem = 0) {
  if (dynamic_smem > 0) {
    int blocks = 0;
    CUSTOM_OP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, kKernel, threads, dynamic_smem));
    return std::max(1, blocks);
  }
  constexpr int kCachedDevices = 64;
  constexpr int kBlockSizes = 1024 / 32;
  static std::atomic<int> cached[kCachedDevices][kBlockSizes] = {};  // 0: new
  const int size = threads / 32 - 1;
  const bool cache = device >= 0 && device < kCachedDevices &&
                     threads % 32 == 0 && size >= 0 && size < kBlockSizes;
  if (cache) {
    if (const int known =
            cached[device][size].load(std::memory_order_relaxed)) {
      return known;
    }
  }
  int blocks = 0;
  CUSTOM_OP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kKernel, threads, 0));
  blocks = std::max(1, blocks);
  if (cache) cached[device][size].store(blocks, std::memory_order_relaxed);
  return blocks;
}

// The same for blocks of kThreads threads.
template <auto kKernel>
int blocks_per_sm(int device) {
  return blocks_per_sm<kKernel>(device, kThreads);
}

// The most dynamic shared memory a block of `kKernel` can have on `device`
// (the block's opt-in limit less the kernel's static shared memory), the
// kernel's limit raised to it once per kernel and device: past 48 KB a launch
// fails without that. `device` must be the current device.
template <auto kKernel>
int64_t max_dynamic_smem(int device, const DeviceInfo& info) {
  constexpr int kCachedDevices = 64;
  static std::atomic<int64_t> cached[kCachedDevices] = {};  // 0: not yet
  const bool cache = device >= 0 && device < kCachedDevices;
  if (cache) {
    if (const int64_t known = cached[device].load(std::memory_order_relaxed)) {
      return known;
    }
  }
  cudaFuncAttributes attributes{};
  CUSTOM_OP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kKernel));
  const int bytes =
      info.max_smem_per_block_optin - int(attributes.sharedSizeBytes);
  CUSTOM_OP_CUDA_CHECK(cudaFuncSetAttribute(
      kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (cache) cached[device].store(bytes, std::memory_order_relaxed);
  return bytes;
}

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace custom_op::cuda
