// Owning handles for device memory and pinned host memory, plus the device
// queries the rest of the CUDA backend needs.
//
// DeviceBuffer is a typed cudaMalloc'd array with host upload/download;
// PinnedHostBuffer is page-locked host memory mapped into the device's address
// space, so a kernel can write tokens straight into it (the decode loop's token
// ring) without a copy on the stream. Both are move-only RAII handles whose
// allocation failures come back as Status values naming the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

namespace detail {
Result<void*> device_allocate(std::size_t bytes, const std::string& name);
void device_free(void* pointer);
Status copy_to_device(void* device, const void* host, std::size_t bytes, const std::string& name);
Status copy_to_host(void* host, const void* device, std::size_t bytes, const std::string& name);
Status fill_bytes(void* device, int byte_value, std::size_t bytes, const std::string& name);
Result<void*> host_allocate_mapped(std::size_t bytes, const std::string& name, void** device_alias);
void host_free(void* pointer);
void count_launch();  // one kernel launch (kernel_launches() in cuda_api.h)
}  // namespace detail

// Waits for all work on the current device; reports asynchronous kernel faults.
Status synchronize_device();

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { detail::device_free(data_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      detail::device_free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // `name` appears in the error when the device is out of memory.
  static Result<DeviceBuffer> allocate(std::size_t count, const std::string& name) {
    DeviceBuffer buffer;
    if (count == 0) return Result<DeviceBuffer>(std::move(buffer));
    CUBEFORGE_ASSIGN_OR_RETURN(void* memory, detail::device_allocate(count * sizeof(T), name));
    buffer.data_ = static_cast<T*>(memory);
    buffer.size_ = count;
    return Result<DeviceBuffer>(std::move(buffer));
  }
  static Result<DeviceBuffer> from_host(const std::vector<T>& host, const std::string& name) {
    CUBEFORGE_ASSIGN_OR_RETURN(DeviceBuffer buffer, allocate(host.size(), name));
    CUBEFORGE_TRY(detail::copy_to_device(buffer.data_, host.data(), host.size() * sizeof(T), name));
    return Result<DeviceBuffer>(std::move(buffer));
  }

  Status upload(const std::vector<T>& host) {
    if (host.size() != size_)
      return make_error(ErrorCode::kInvalidArgument, "DeviceBuffer::upload: " + std::to_string(host.size()) +
                                                         " elements into a buffer of " + std::to_string(size_));
    return detail::copy_to_device(data_, host.data(), size_ * sizeof(T), "DeviceBuffer::upload");
  }
  Result<std::vector<T>> download() const {
    std::vector<T> host(size_);
    CUBEFORGE_TRY(detail::copy_to_host(host.data(), data_, size_ * sizeof(T), "DeviceBuffer::download"));
    return host;
  }
  // Sets every byte to `byte_value`; 0xff makes every f32 and bf16 element a NaN,
  // which tests use to catch elements a kernel forgot to write.
  Status fill_bytes(int byte_value) {
    return detail::fill_bytes(data_, byte_value, size_ * sizeof(T), "DeviceBuffer::fill_bytes");
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory that kernels can write through `device_data()`.
template <class T>
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  ~PinnedHostBuffer() { detail::host_free(host_); }
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : host_(std::exchange(other.host_, nullptr)),
        device_(std::exchange(other.device_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept {
    if (this != &other) {
      detail::host_free(host_);
      host_ = std::exchange(other.host_, nullptr);
      device_ = std::exchange(other.device_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  static Result<PinnedHostBuffer> allocate(std::size_t count, const std::string& name) {
    PinnedHostBuffer buffer;
    if (count == 0) return Result<PinnedHostBuffer>(std::move(buffer));
    void* device_alias = nullptr;
    CUBEFORGE_ASSIGN_OR_RETURN(void* memory, detail::host_allocate_mapped(count * sizeof(T), name, &device_alias));
    buffer.host_ = static_cast<T*>(memory);
    buffer.device_ = static_cast<T*>(device_alias);
    buffer.size_ = count;
    return Result<PinnedHostBuffer>(std::move(buffer));
  }

  // Host view; elements written by kernels must be read through a volatile or
  // atomic access after the writer's visibility flag (see sampling.h).
  T* host_data() { return host_; }
  const T* host_data() const { return host_; }
  T* device_data() { return device_; }
  std::size_t size() const { return size_; }

 private:
  T* host_ = nullptr;
  T* device_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cubeforge::cuda
