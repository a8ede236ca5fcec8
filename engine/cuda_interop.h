// CUDA<->Vulkan interop: the one module that knows both APIs.
//
// When the CUDA device whose UUID equals the Vulkan device's is present, mesh
// buffers are allocated by Vulkan as exportable memory (VK_KHR_external_memory_fd),
// imported into CUDA (cudaImportExternalMemory + cudaExternalMemoryGetMappedBuffer)
// and written by CUDA directly; a timeline semaphore exported from Vulkan and
// imported into CUDA orders those writes before the draws that read them, with
// no CPU wait. The build without CUDA compiles cuda_interop_absent.cpp instead,
// whose create() explains why interop is unavailable; the mesh buffers then
// upload through a staging buffer behind the same interface. The Vulkan half
// (cuda_interop_vulkan.cpp) is built either way, so it is tested on any device
// with VK_KHR_external_memory_fd, lavapipe included.
//
// Teardown order matters: CUDA's mapping and external-memory object go first,
// then the Vulkan buffer and memory; the CUDA semaphore before the Vulkan one.
//
// Devices: cudaSetDevice changes the calling thread's current device, and the
// threads that call in here (the render thread, tests) may run other CUDA work
// (the app's inference) on theirs. Every CUDA call here runs with the matched
// device made current for the call and the caller's restored after it; code
// that launches on stream() makes cuda_device() current itself.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/context.h"
#include "engine/gpu_resources.h"
#include "inference/core/result.h"

namespace cubeforge::engine {

// A Vulkan buffer whose memory CUDA sees at device_pointer.
class SharedBuffer {
 public:
  SharedBuffer() = default;
  ~SharedBuffer() { reset(); }
  SharedBuffer(SharedBuffer&& other) noexcept { *this = std::move(other); }
  SharedBuffer& operator=(SharedBuffer&& other) noexcept;
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void reset();  // CUDA side first, then the Vulkan buffer
  const Buffer& buffer() const { return buffer_; }
  void* device_pointer() const { return device_pointer_; }
  bool dedicated() const { return dedicated_; }
  explicit operator bool() const { return static_cast<bool>(buffer_); }

 private:
  friend class CudaInterop;
  Buffer buffer_;
  void* device_pointer_ = nullptr;
  void* external_memory_ = nullptr;  // cudaExternalMemory_t
  int cuda_device_ = -1;             // the device the memory is imported into
  bool dedicated_ = false;
};

// Vulkan half of a shared buffer: a device-local buffer whose memory is
// allocated exportable (dedicated when the driver asks for it) and exported as
// an opaque fd. The caller owns the fd until an import takes it.
struct ExportedBuffer {
  Buffer buffer;
  int fd = -1;
  bool dedicated = false;
};
Result<ExportedBuffer> export_buffer(Context& context, VkDeviceSize size, VkBufferUsageFlags usage, const char* what);

class CudaInterop {
 public:
  // Fails with the reason when interop cannot serve this context: built
  // without CUDA, no CUDA device, no CUDA device with the Vulkan device's
  // UUID, or the Vulkan device lacks the external fd extensions.
  static Result<std::unique_ptr<CudaInterop>> create(Context& context);
  ~CudaInterop();
  CudaInterop(const CudaInterop&) = delete;
  CudaInterop& operator=(const CudaInterop&) = delete;

  Result<SharedBuffer> create_shared_buffer(VkDeviceSize size, VkBufferUsageFlags usage, const char* what);

  // Timeline semaphore that CUDA signals when a mesh is written; draws wait on it.
  VkSemaphore ready_semaphore() const { return ready_semaphore_; }
  // The CUDA stream every interop write goes through (cudaStream_t).
  void* stream() const { return stream_; }
  int cuda_device() const { return cuda_device_; }

  // Queues a host-to-device copy on the interop stream.
  Status copy_from_host(void* device_destination, const void* host_source, size_t bytes);
  // Queues the semaphore signal after everything already on the stream.
  Status signal_ready(uint64_t value);
  // Blocks until the stream is idle (teardown, tests).
  Status synchronize();

 private:
  explicit CudaInterop(Context& context) : context_(context) {}
  Context& context_;
  int cuda_device_ = -1;
  void* stream_ = nullptr;                 // cudaStream_t
  VkSemaphore ready_semaphore_ = VK_NULL_HANDLE;
  void* cuda_ready_semaphore_ = nullptr;   // cudaExternalSemaphore_t
};

}  // namespace cubeforge::engine
