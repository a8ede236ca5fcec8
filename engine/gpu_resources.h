// RAII wrappers for buffers and images with their memory.
//
// Each wrapper owns one VkBuffer/VkImage and one dedicated VkDeviceMemory, and
// counts itself in the context's ResourceCounters so leak tests can compare
// against a baseline. The engine's allocations are few and large (mesh slots,
// render targets), so one allocation per resource is the simple right choice.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>

#include "engine/context.h"
#include "inference/core/result.h"

namespace cubeforge::engine {

class Buffer {
 public:
  Buffer() = default;
  // host_visible: HOST_VISIBLE|HOST_COHERENT and persistently mapped; otherwise DEVICE_LOCAL.
  static Result<Buffer> create(Context& context, VkDeviceSize size, VkBufferUsageFlags usage, bool host_visible,
                               const char* what);
  // Takes ownership of handles made elsewhere (the interop module's exportable buffers).
  static Buffer adopt(Context& context, VkBuffer buffer, VkDeviceMemory memory, VkDeviceSize size,
                      VkDeviceSize allocation_size);
  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void reset();
  VkBuffer handle() const { return buffer_; }
  VkDeviceMemory memory() const { return memory_; }
  VkDeviceSize size() const { return size_; }
  VkDeviceSize allocation_size() const { return allocation_size_; }
  void* mapped() const { return mapped_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }

 private:
  Context* context_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  VkDeviceSize allocation_size_ = 0;
  void* mapped_ = nullptr;
};

struct ImageDescription {
  VkExtent2D extent{};
  VkFormat format = VK_FORMAT_UNDEFINED;
  VkImageUsageFlags usage = 0;
  VkSampleCountFlagBits samples = VK_SAMPLE_COUNT_1_BIT;
  VkImageAspectFlags aspect = VK_IMAGE_ASPECT_COLOR_BIT;
};

class Image {
 public:
  Image() = default;
  static Result<Image> create(Context& context, const ImageDescription& description, const char* what);
  ~Image() { reset(); }
  Image(Image&& other) noexcept { *this = std::move(other); }
  Image& operator=(Image&& other) noexcept;
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;

  void reset();
  VkImage handle() const { return image_; }
  VkImageView view() const { return view_; }
  const ImageDescription& description() const { return description_; }
  explicit operator bool() const { return image_ != VK_NULL_HANDLE; }

 private:
  Context* context_ = nullptr;
  VkImage image_ = VK_NULL_HANDLE;
  VkImageView view_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize allocation_size_ = 0;
  ImageDescription description_;
};

}  // namespace cubeforge::engine
