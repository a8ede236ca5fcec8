// Buffer and image creation, memory type choice, counted destruction.
#include "engine/gpu_resources.h"

#include <string>
#include <utility>

#include "engine/vk_check.h"

namespace cubeforge::engine {

Result<Buffer> Buffer::create(Context& context, VkDeviceSize size, VkBufferUsageFlags usage, bool host_visible,
                              const char* what) {
  VkDevice device = context.device();
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer;
  VK_TRY(what, vkCreateBuffer(device, &info, nullptr, &buffer), std::to_string(size) + " bytes");

  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device, buffer, &requirements);
  VkMemoryPropertyFlags wanted = host_visible
                                     ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  int type = context.find_memory_type(requirements.memoryTypeBits, wanted);
  if (type < 0) {
    vkDestroyBuffer(device, buffer, nullptr);
    return make_error(ErrorCode::kUnsupported, std::string(what) + ": no memory type with the needed properties");
  }
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory;
  VkResult result = vkAllocateMemory(device, &alloc, nullptr, &memory);
  if (result != VK_SUCCESS) {
    vkDestroyBuffer(device, buffer, nullptr);
    return vulkan_error(what, "vkAllocateMemory", result,
                        std::to_string(requirements.size) + " bytes; try a smaller mesh or close other GPU programs");
  }
  VK_CHECK(vkBindBufferMemory(device, buffer, memory, 0), "fresh memory from the buffer's own requirements");
  Buffer out = adopt(context, buffer, memory, size, requirements.size);
  if (host_visible) VK_CHECK(vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &out.mapped_), "host-visible memory");
  return out;
}

Buffer Buffer::adopt(Context& context, VkBuffer buffer, VkDeviceMemory memory, VkDeviceSize size,
                     VkDeviceSize allocation_size) {
  Buffer out;
  out.context_ = &context;
  out.buffer_ = buffer;
  out.memory_ = memory;
  out.size_ = size;
  out.allocation_size_ = allocation_size;
  context.counters().buffers++;
  context.counters().allocations++;
  context.counters().allocated_bytes += static_cast<int64_t>(allocation_size);
  return out;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    allocation_size_ = std::exchange(other.allocation_size_, 0);
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::reset() {
  if (buffer_ == VK_NULL_HANDLE) return;
  VkDevice device = context_->device();
  if (mapped_) vkUnmapMemory(device, memory_);
  vkDestroyBuffer(device, buffer_, nullptr);
  vkFreeMemory(device, memory_, nullptr);
  context_->counters().buffers--;
  context_->counters().allocations--;
  context_->counters().allocated_bytes -= static_cast<int64_t>(allocation_size_);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  size_ = allocation_size_ = 0;
}

Result<Image> Image::create(Context& context, const ImageDescription& description, const char* what) {
  VkDevice device = context.device();
  VkImageCreateInfo info{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
  info.imageType = VK_IMAGE_TYPE_2D;
  info.format = description.format;
  info.extent = {description.extent.width, description.extent.height, 1};
  info.mipLevels = 1;
  info.arrayLayers = 1;
  info.samples = description.samples;
  info.tiling = VK_IMAGE_TILING_OPTIMAL;
  info.usage = description.usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  info.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  VkImage image;
  VK_TRY(what, vkCreateImage(device, &info, nullptr, &image),
         std::to_string(description.extent.width) + "x" + std::to_string(description.extent.height));

  VkMemoryRequirements requirements;
  vkGetImageMemoryRequirements(device, image, &requirements);
  int type = context.find_memory_type(requirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) type = context.find_memory_type(requirements.memoryTypeBits, 0);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory;
  VkResult result = vkAllocateMemory(device, &alloc, nullptr, &memory);
  if (result != VK_SUCCESS) {
    vkDestroyImage(device, image, nullptr);
    return vulkan_error(what, "vkAllocateMemory", result, "try a smaller render target");
  }
  VK_CHECK(vkBindImageMemory(device, image, memory, 0), "fresh memory from the image's own requirements");

  VkImageViewCreateInfo view_info{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
  view_info.image = image;
  view_info.viewType = VK_IMAGE_VIEW_TYPE_2D;
  view_info.format = description.format;
  view_info.subresourceRange = {description.aspect, 0, 1, 0, 1};
  VkImageView view;
  VK_CHECK(vkCreateImageView(device, &view_info, nullptr, &view), "view of a fresh image");

  Image out;
  out.context_ = &context;
  out.image_ = image;
  out.view_ = view;
  out.memory_ = memory;
  out.allocation_size_ = requirements.size;
  out.description_ = description;
  context.counters().images++;
  context.counters().allocations++;
  context.counters().allocated_bytes += static_cast<int64_t>(requirements.size);
  return out;
}

Image& Image::operator=(Image&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    image_ = std::exchange(other.image_, VK_NULL_HANDLE);
    view_ = std::exchange(other.view_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    allocation_size_ = std::exchange(other.allocation_size_, 0);
    description_ = other.description_;
  }
  return *this;
}

void Image::reset() {
  if (image_ == VK_NULL_HANDLE) return;
  VkDevice device = context_->device();
  vkDestroyImageView(device, view_, nullptr);
  vkDestroyImage(device, image_, nullptr);
  vkFreeMemory(device, memory_, nullptr);
  context_->counters().images--;
  context_->counters().allocations--;
  context_->counters().allocated_bytes -= static_cast<int64_t>(allocation_size_);
  image_ = VK_NULL_HANDLE;
  view_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
}

}  // namespace cubeforge::engine
