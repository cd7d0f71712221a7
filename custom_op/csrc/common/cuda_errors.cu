// The messages of CUDA errors. Errors that mean this build cannot run on the
// GPU or driver at hand say which GPU, what the library holds and the fix,
// rather than the runtime's bare "no kernel image is available".
#include <dlfcn.h>

#include <algorithm>
#include <string>

#include "cuda_utils.cuh"

// The architectures compiled (TORCH_CUDA_ARCH_LIST, '/' for ';'), passed by
// the build as -DCUSTOM_OP_CUDA_ARCHS=8.0/9.0+PTX.
#define CUSTOM_OP_ARCHS_TEXT_(x) #x
#define CUSTOM_OP_ARCHS_TEXT(x) CUSTOM_OP_ARCHS_TEXT_(x)
#ifdef CUSTOM_OP_CUDA_ARCHS
#define CUSTOM_OP_ARCHS CUSTOM_OP_ARCHS_TEXT(CUSTOM_OP_CUDA_ARCHS)
#else
#define CUSTOM_OP_ARCHS "(not recorded)"
#endif

namespace custom_op::cuda {
namespace {

std::string version_str(int version) {  // 12040 -> "12.4"
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

// This library's file, found from one of its own functions.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&version_str), &info) != 0 &&
      info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "custom_op's CUDA library";
}

// "GPU 0 (NVIDIA H200, compute capability 9.0)"; `cc` gets "9.0".
std::string device_str(std::string& cc) {
  int device = -1;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cc = "<its compute capability>";
    return "this GPU";
  }
  cc = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  return "GPU " + std::to_string(device) + " (" + prop.name +
         ", compute capability " + cc + ")";
}

std::string driver_str() {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    return "no NVIDIA driver was found";
  }
  return "the NVIDIA driver supports CUDA " + version_str(driver);
}

// TORCH_CUDA_ARCH_LIST as it was set: "8.0;9.0+PTX".
std::string arch_list() {
  std::string archs = CUSTOM_OP_ARCHS;
  std::replace(archs.begin(), archs.end(), '/', ';');
  return archs;
}

constexpr const char* kRebuild =
    "pip install --no-build-isolation . (or nox -s build) from a checkout";

}  // namespace

void throw_error(cudaError_t err, const char* what) {
  std::string message = std::string("custom_op: CUDA error in ") + what + ": " +
                        cudaGetErrorString(err);
  std::string cc;
  switch (err) {
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction: {
      const std::string device = device_str(cc);
      message +=
          ". " + library_path() + " holds no kernel that " + device +
          " can run: it was built for TORCH_CUDA_ARCH_LIST=" + arch_list() +
          " (a GPU runs code built for its own major version at or "
          "below its compute capability, or +PTX of an older one). "
          "Fix: rebuild with the GPU's architecture in the list, e.g. "
          "TORCH_CUDA_ARCH_LIST=\"" +
          cc + "\" " + kRebuild;
      break;
    }
    case cudaErrorUnsupportedPtxVersion: {
      const std::string device = device_str(cc);
      message += ". " + library_path() + " holds no machine code for " +
                 device + ", only PTX of CUDA " + version_str(CUDART_VERSION) +
                 " (TORCH_CUDA_ARCH_LIST=" + arch_list() + "), and " +
                 driver_str() +
                 ". Fix: update the NVIDIA driver, or rebuild with "
                 "TORCH_CUDA_ARCH_LIST=\"" +
                 cc + "\" " + kRebuild;
      break;
    }
    case cudaErrorInsufficientDriver:
      message += ". " + library_path() + " carries the CUDA " +
                 version_str(CUDART_VERSION) + " runtime and " + driver_str() +
                 ". Fix: update the NVIDIA driver (CUDA 13 needs 580 or "
                 "newer, CUDA 12 needs 525 or newer), or rebuild with the "
                 "CUDA toolkit of the driver's major version (CUDA_HOME=...) " +
                 kRebuild;
      break;
    default:
      break;
  }
  throw std::runtime_error(message);
}

}  // namespace custom_op::cuda
