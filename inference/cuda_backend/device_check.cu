// Whether this machine can run the CUDA backend (see token_backend.h):
// asked at run time, so a build with CUDA on a machine without a driver or
// device says why instead of failing.
#include <cstdio>

#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda_backend/gpt_weights.h"
#include "inference/cuda_backend/token_backend.h"

namespace cubeforge::cuda {
namespace {

// Never launched: its attributes tell whether the build has code for the device.
__global__ void probe_kernel(int* out) {
  if (out) *out = 1;
}

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / double(std::size_t(1) << 30));
  return text;
}

}  // namespace

DeviceCheck check_device(std::size_t bytes_needed) {
  DeviceCheck check;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    cudaGetLastError();
    check.reason = "no CUDA driver (no NVIDIA GPU, or its driver is not installed)";
    return check;
  }
  // A driver of an older major version cannot run this runtime; within one
  // major version the runtime may be newer (minor version compatibility), and
  // the device count below says when it still cannot.
  const std::string too_old = "the NVIDIA driver supports CUDA " + version_text(driver) +
                              " but this build needs CUDA " + version_text(runtime) + "; update the driver";
  if (driver / 1000 < runtime / 1000) {
    check.reason = too_old;
    return check;
  }
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    cudaGetLastError();
    check.reason = counted == cudaErrorInsufficientDriver ? too_old
                   : counted != cudaSuccess ? std::string("no CUDA device (") + cudaGetErrorString(counted) + ")"
                                            : "no CUDA device";
    return check;
  }
  check.device = device_summary();
  cudaFuncAttributes attributes{};
  const cudaError_t probed = cudaFuncGetAttributes(&attributes, probe_kernel);
  if (probed != cudaSuccess) {
    cudaGetLastError();
    cudaDeviceProp properties{};
    cudaGetDeviceProperties(&properties, 0);
    check.reason = "this build has no kernels for compute capability " + std::to_string(properties.major) + "." +
                   std::to_string(properties.minor) + " (" + cudaGetErrorString(probed) +
                   "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(properties.major) +
                   std::to_string(properties.minor);
    return check;
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    check.reason = "the CUDA device does not report its free memory";
    return check;
  }
  check.free_bytes = free_bytes;
  if (bytes_needed > free_bytes) {
    check.out_of_memory = true;
    check.reason = "the model needs about " + gib(bytes_needed) + " of device memory and " + check.device +
                   " has " + gib(free_bytes) + " free";
    return check;
  }
  check.usable = true;
  check.reason = gib(free_bytes) + " free";
  return check;
}

std::size_t device_bytes_needed(const DualStreamGpt& model) {
  // The weights, and room for a generation's cache, scratch and cuBLASLt.
  return gpt_weight_device_bytes(model) + (std::size_t(1) << 30);
}

}  // namespace cubeforge::cuda
