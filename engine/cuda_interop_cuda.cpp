// CUDA<->Vulkan interop with the CUDA runtime: exportable Vulkan memory and an
// exported timeline semaphore, imported into the CUDA device with the same UUID.
// See cuda_interop.h for the contract and the teardown order.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "engine/cuda_interop.h"
#include "engine/vk_check.h"

namespace cubeforge::engine {
namespace {

Error cuda_error(const char* call, cudaError_t error, const std::string& advice = {}) {
  std::string message = std::string("CUDA interop: ") + call + " failed: " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")";
  if (!advice.empty()) message += "; " + advice;
  return make_error(error == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal, message);
}

template <class Function>
Function device_function(VkDevice device, const char* name) {
  return reinterpret_cast<Function>(vkGetDeviceProcAddr(device, name));
}

// Makes `device` the calling thread's current CUDA device for the scope and
// restores the caller's afterwards (see cuda_interop.h, "Devices").
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (device < 0 || cudaGetDevice(&previous_) != cudaSuccess) {
      previous_ = -1;
      return;
    }
    status_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
    if (status_ != cudaSuccess) previous_ = -1;
  }
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace

SharedBuffer& SharedBuffer::operator=(SharedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    buffer_ = std::move(other.buffer_);
    device_pointer_ = std::exchange(other.device_pointer_, nullptr);
    external_memory_ = std::exchange(other.external_memory_, nullptr);
    cuda_device_ = std::exchange(other.cuda_device_, -1);
    dedicated_ = std::exchange(other.dedicated_, false);
  }
  return *this;
}

void SharedBuffer::reset() {
  // CUDA lets go of the memory before Vulkan frees it.
  const CurrentDevice current(device_pointer_ || external_memory_ ? cuda_device_ : -1);
  if (device_pointer_) cudaFree(device_pointer_);
  if (external_memory_) cudaDestroyExternalMemory(static_cast<cudaExternalMemory_t>(external_memory_));
  device_pointer_ = nullptr;
  external_memory_ = nullptr;
  buffer_.reset();
}

Result<std::unique_ptr<CudaInterop>> CudaInterop::create(Context& context) {
  if (!context.has_external_fd_interop()) {
    std::string missing = context.has_external_memory_fd() ? "" : "VK_KHR_external_memory_fd";
    if (!context.has_external_semaphore_fd())
      missing += std::string(missing.empty() ? "" : " and ") + "VK_KHR_external_semaphore_fd";
    return make_error(ErrorCode::kUnsupported, "CUDA interop: " + context.device_name() + " lacks " + missing);
  }
  int device_count = 0;
  cudaError_t status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error for later CUDA users
    return make_error(ErrorCode::kNotFound, std::string("CUDA interop: no CUDA device (") +
                                                (status != cudaSuccess ? cudaGetErrorString(status) : "none found") +
                                                ")");
  }
  int matching = -1;
  for (int i = 0; i < device_count; ++i) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
    if (std::memcmp(props.uuid.bytes, context.device_uuid().data(), VK_UUID_SIZE) == 0) {
      matching = i;
      break;
    }
  }
  if (matching < 0)
    return make_error(ErrorCode::kNotFound, "CUDA interop: no CUDA device has the UUID of Vulkan device " +
                                                context.device_name() + " (the viewport runs on another GPU)");

  std::unique_ptr<CudaInterop> interop(new CudaInterop(context));
  interop->cuda_device_ = matching;
  // The stream and the semaphore belong to the matched device; the caller
  // keeps its own current device.
  const CurrentDevice current(matching);
  if ((status = current.status()) != cudaSuccess) return cuda_error("cudaSetDevice", status);
  cudaStream_t stream = nullptr;
  if ((status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess)
    return cuda_error("cudaStreamCreateWithFlags", status);
  interop->stream_ = stream;

  // Exported timeline semaphore: Vulkan creates it, CUDA signals it.
  VkDevice device = context.device();
  VkSemaphoreTypeCreateInfo type_info{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type_info.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkPhysicalDeviceExternalSemaphoreInfo query{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO};
  query.pNext = &type_info;
  query.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkExternalSemaphoreProperties semaphore_props{VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES};
  vkGetPhysicalDeviceExternalSemaphoreProperties(context.physical_device(), &query, &semaphore_props);
  if (!(semaphore_props.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT))
    return make_error(ErrorCode::kUnsupported,
                      "CUDA interop: " + context.device_name() + " cannot export timeline semaphores as fds");
  VkExportSemaphoreCreateInfo export_info{VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO};
  export_info.handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
  type_info.pNext = &export_info;
  VkSemaphoreCreateInfo semaphore_info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  semaphore_info.pNext = &type_info;
  VK_TRY("CUDA interop", vkCreateSemaphore(device, &semaphore_info, nullptr, &interop->ready_semaphore_),
         "exportable timeline semaphore");

  auto get_semaphore_fd = device_function<PFN_vkGetSemaphoreFdKHR>(device, "vkGetSemaphoreFdKHR");
  CUBEFORGE_CHECK(get_semaphore_fd != nullptr, "VK_KHR_external_semaphore_fd is enabled on the device");
  VkSemaphoreGetFdInfoKHR fd_info{VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR};
  fd_info.semaphore = interop->ready_semaphore_;
  fd_info.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;
  int fd = -1;
  VK_TRY("CUDA interop", get_semaphore_fd(device, &fd_info, &fd), "exporting the mesh-ready semaphore");
  cudaExternalSemaphoreHandleDesc semaphore_desc{};
  semaphore_desc.type = cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd;
  semaphore_desc.handle.fd = fd;
  cudaExternalSemaphore_t cuda_semaphore = nullptr;
  if ((status = cudaImportExternalSemaphore(&cuda_semaphore, &semaphore_desc)) != cudaSuccess) {
    close(fd);  // CUDA owns the fd only when the import succeeds
    return cuda_error("cudaImportExternalSemaphore", status, "driver too old for timeline semaphores?");
  }
  interop->cuda_ready_semaphore_ = cuda_semaphore;
  return interop;
}

CudaInterop::~CudaInterop() {
  const CurrentDevice current(cuda_device_);
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  if (cuda_ready_semaphore_) cudaDestroyExternalSemaphore(static_cast<cudaExternalSemaphore_t>(cuda_ready_semaphore_));
  if (ready_semaphore_ != VK_NULL_HANDLE) {
    // Draws may still wait on it.
    vkDeviceWaitIdle(context_.device());
    vkDestroySemaphore(context_.device(), ready_semaphore_, nullptr);
  }
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Result<SharedBuffer> CudaInterop::create_shared_buffer(VkDeviceSize size, VkBufferUsageFlags usage, const char* what) {
  CUBEFORGE_ASSIGN_OR_RETURN(ExportedBuffer exported, export_buffer(context_, size, usage, what));
  const CurrentDevice current(cuda_device_);
  if (current.status() != cudaSuccess) {
    close(exported.fd);
    return cuda_error("cudaSetDevice", current.status());
  }
  SharedBuffer shared;
  shared.cuda_device_ = cuda_device_;
  shared.dedicated_ = exported.dedicated;
  const VkDeviceSize allocation_size = exported.buffer.allocation_size();
  shared.buffer_ = std::move(exported.buffer);
  const int fd = exported.fd;

  cudaExternalMemoryHandleDesc memory_desc{};
  memory_desc.type = cudaExternalMemoryHandleTypeOpaqueFd;
  memory_desc.handle.fd = fd;
  memory_desc.size = allocation_size;  // the whole allocation, not the buffer's size
  memory_desc.flags = shared.dedicated_ ? cudaExternalMemoryDedicated : 0;
  cudaExternalMemory_t external_memory = nullptr;
  cudaError_t status = cudaImportExternalMemory(&external_memory, &memory_desc);
  if (status != cudaSuccess) {
    close(fd);
    return cuda_error("cudaImportExternalMemory", status);
  }
  shared.external_memory_ = external_memory;
  cudaExternalMemoryBufferDesc buffer_desc{};
  buffer_desc.offset = 0;
  buffer_desc.size = size;
  void* pointer = nullptr;
  if ((status = cudaExternalMemoryGetMappedBuffer(&pointer, external_memory, &buffer_desc)) != cudaSuccess)
    return cuda_error("cudaExternalMemoryGetMappedBuffer", status);
  shared.device_pointer_ = pointer;
  return shared;
}

Status CudaInterop::copy_from_host(void* device_destination, const void* host_source, size_t bytes) {
  const CurrentDevice current(cuda_device_);
  cudaError_t status = cudaMemcpyAsync(device_destination, host_source, bytes, cudaMemcpyHostToDevice,
                                       static_cast<cudaStream_t>(stream_));
  if (status != cudaSuccess) return cuda_error("cudaMemcpyAsync", status);
  return ok_status();
}

Status CudaInterop::signal_ready(uint64_t value) {
  const CurrentDevice current(cuda_device_);
  cudaExternalSemaphoreSignalParams params{};
  params.params.fence.value = value;
  auto semaphore = static_cast<cudaExternalSemaphore_t>(cuda_ready_semaphore_);
  cudaError_t status = cudaSignalExternalSemaphoresAsync(&semaphore, &params, 1, static_cast<cudaStream_t>(stream_));
  if (status != cudaSuccess) return cuda_error("cudaSignalExternalSemaphoresAsync", status);
  return ok_status();
}

Status CudaInterop::synchronize() {
  const CurrentDevice current(cuda_device_);
  cudaError_t status = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  if (status != cudaSuccess) return cuda_error("cudaStreamSynchronize", status);
  return ok_status();
}

}  // namespace cubeforge::engine
