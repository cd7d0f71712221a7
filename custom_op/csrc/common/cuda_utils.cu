#include "cuda_utils.cuh"

#include <mutex>

namespace custom_op::cuda {

const DeviceInfo& device_info(int device) {
  constexpr int kMaxDevices = 64;
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) {
    throw std::runtime_error("custom_op: CUDA device index " +
                             std::to_string(device) + " out of range");
  }
  std::call_once(once[device], [device] {
    DeviceInfo& info = infos[device];
    CUSTOM_OP_CUDA_CHECK(cudaDeviceGetAttribute(
        &info.sm_count, cudaDevAttrMultiProcessorCount, device));
    CUSTOM_OP_CUDA_CHECK(
        cudaDeviceGetAttribute(&info.max_threads_per_sm,
                               cudaDevAttrMaxThreadsPerMultiProcessor, device));
    CUSTOM_OP_CUDA_CHECK(cudaDeviceGetAttribute(
        &info.max_smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
        device));
    CUSTOM_OP_CUDA_CHECK(cudaDeviceGetAttribute(
        &info.major, cudaDevAttrComputeCapabilityMajor, device));
  });
  return infos[device];
}

}  // namespace custom_op::cuda
