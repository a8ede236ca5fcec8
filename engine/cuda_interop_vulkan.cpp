// Vulkan half of CUDA<->Vulkan interop: exportable buffer memory and its fd.
// Built with or without CUDA (see cuda_interop.h).
#include <string>

#include "engine/cuda_interop.h"
#include "engine/vk_check.h"

namespace cubeforge::engine {

Result<ExportedBuffer> export_buffer(Context& context, VkDeviceSize size, VkBufferUsageFlags usage, const char* what) {
  if (!context.has_external_memory_fd())
    return make_error(ErrorCode::kUnsupported,
                      std::string(what) + ": " + context.device_name() + " lacks VK_KHR_external_memory_fd");
  VkDevice device = context.device();
  VkPhysicalDeviceExternalBufferInfo query{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO};
  query.usage = usage;
  query.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkExternalBufferProperties external_props{VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES};
  vkGetPhysicalDeviceExternalBufferProperties(context.physical_device(), &query, &external_props);
  const VkExternalMemoryFeatureFlags features = external_props.externalMemoryProperties.externalMemoryFeatures;
  if (!(features & VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT))
    return make_error(ErrorCode::kUnsupported,
                      std::string(what) + ": " + context.device_name() + " cannot export such buffers as opaque fds");

  VkExternalMemoryBufferCreateInfo external_info{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
  external_info.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.pNext = &external_info;
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer;
  VK_TRY(what, vkCreateBuffer(device, &info, nullptr, &buffer), "exportable buffer");

  VkMemoryDedicatedRequirements dedicated_requirements{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS};
  VkMemoryRequirements2 requirements{VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2};
  requirements.pNext = &dedicated_requirements;
  VkBufferMemoryRequirementsInfo2 requirements_info{VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2};
  requirements_info.buffer = buffer;
  vkGetBufferMemoryRequirements2(device, &requirements_info, &requirements);
  // Dedicated only when the driver asks for it; the importer must be told the same.
  const bool dedicated = (features & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT) ||
                         dedicated_requirements.prefersDedicatedAllocation ||
                         dedicated_requirements.requiresDedicatedAllocation;

  VkExportMemoryAllocateInfo export_info{VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO};
  export_info.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkMemoryDedicatedAllocateInfo dedicated_info{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  dedicated_info.buffer = buffer;
  if (dedicated) export_info.pNext = &dedicated_info;
  int type = context.find_memory_type(requirements.memoryRequirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) {
    vkDestroyBuffer(device, buffer, nullptr);
    return make_error(ErrorCode::kUnsupported, std::string(what) + ": no device-local memory type can be exported");
  }
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.pNext = &export_info;
  alloc.allocationSize = requirements.memoryRequirements.size;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory;
  VkResult result = vkAllocateMemory(device, &alloc, nullptr, &memory);
  if (result != VK_SUCCESS) {
    vkDestroyBuffer(device, buffer, nullptr);
    return vulkan_error(what, "vkAllocateMemory (exportable)", result, std::to_string(alloc.allocationSize) + " bytes");
  }
  VK_CHECK(vkBindBufferMemory(device, buffer, memory, 0), "fresh memory from the buffer's own requirements");

  ExportedBuffer exported;
  exported.buffer = Buffer::adopt(context, buffer, memory, size, alloc.allocationSize);
  exported.dedicated = dedicated;
  auto get_memory_fd = reinterpret_cast<PFN_vkGetMemoryFdKHR>(vkGetDeviceProcAddr(device, "vkGetMemoryFdKHR"));
  CUBEFORGE_CHECK(get_memory_fd != nullptr, "VK_KHR_external_memory_fd is enabled on the device");
  VkMemoryGetFdInfoKHR fd_info{VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR};
  fd_info.memory = memory;
  fd_info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VK_TRY(what, get_memory_fd(device, &fd_info, &exported.fd), "exporting buffer memory");
  return exported;
}

}  // namespace cubeforge::engine
