// Runtime calls behind device_memory.h and the device queries of cuda_api.h.
// Compiled by the host compiler against the CUDA runtime headers.
#include "inference/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdio>

#include "inference/cuda/cuda_status.h"

namespace cubeforge::cuda {
namespace {

using detail::cuda_status;

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / double(1ull << 30));
  return text;
}

}  // namespace

std::string supported_head_dims() {
  return "a multiple of " + std::to_string(kHeadDimStep) + " from " + std::to_string(kHeadDimStep) + " to " +
         std::to_string(kMaxHeadDim);
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" status for later callers
    return 0;
  }
  return count;
}

std::string device_summary() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device (") + cudaGetErrorString(error) + ")";
  }
  if (count == 0) return "no CUDA device";
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) return "CUDA device 0 (properties unavailable)";
  return std::string(properties.name) + ", compute " + std::to_string(properties.major) + "." +
         std::to_string(properties.minor) + ", " + std::to_string(properties.multiProcessorCount) + " SMs, " +
         gib(properties.totalGlobalMem);
}

int multiprocessor_count() {
  static std::array<int, 64> cached{};  // per device ordinal; 0 = not yet asked
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= int(cached.size())) return 1;
  if (cached[device] == 0) {
    int count = 0;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0)
      return 1;
    cached[device] = count;
  }
  return cached[device];
}

namespace {
std::atomic<long long> launches{0};
}  // namespace

void detail::count_launch() { launches.fetch_add(1, std::memory_order_relaxed); }
long long kernel_launches() { return launches.load(std::memory_order_relaxed); }

Status synchronize_device() { return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

namespace detail {

Result<void*> device_allocate(std::size_t bytes, const std::string& name) {
  void* pointer = nullptr;
  cudaError_t error = cudaMalloc(&pointer, bytes);
  if (error != cudaSuccess)
    return cuda_status(error, "cudaMalloc of " + std::to_string(bytes) + " bytes for '" + name + "'").take_error();
  return pointer;
}

void device_free(void* pointer) {
  if (pointer) cudaFree(pointer);
}

Status copy_to_device(void* device, const void* host, std::size_t bytes, const std::string& name) {
  if (bytes == 0) return ok_status();
  return cuda_status(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "upload of '" + name + "'");
}

Status copy_to_host(void* host, const void* device, std::size_t bytes, const std::string& name) {
  if (bytes == 0) return ok_status();
  return cuda_status(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "download of '" + name + "'");
}

Status fill_bytes(void* device, int byte_value, std::size_t bytes, const std::string& name) {
  if (bytes == 0) return ok_status();
  return cuda_status(cudaMemset(device, byte_value, bytes), "memset of '" + name + "'");
}

Result<void*> host_allocate_mapped(std::size_t bytes, const std::string& name, void** device_alias) {
  void* pointer = nullptr;
  cudaError_t error = cudaHostAlloc(&pointer, bytes, cudaHostAllocMapped);
  if (error != cudaSuccess)
    return cuda_status(error, "cudaHostAlloc of " + std::to_string(bytes) + " bytes for '" + name + "'").take_error();
  error = cudaHostGetDevicePointer(device_alias, pointer, 0);
  if (error != cudaSuccess) {
    cudaFreeHost(pointer);
    return cuda_status(error, "cudaHostGetDevicePointer for '" + name + "'").take_error();
  }
  return pointer;
}

void host_free(void* pointer) {
  if (pointer) cudaFreeHost(pointer);
}

}  // namespace detail
}  // namespace cubeforge::cuda
