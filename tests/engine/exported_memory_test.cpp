// The Vulkan half of CUDA interop, on any device with VK_KHR_external_memory_fd
// (lavapipe included): a buffer allocated exportable, filled on the GPU, its fd
// imported back as a second VkDeviceMemory, as CUDA would import it; the
// imported buffer must read the same bytes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "engine/cuda_interop.h"
#include "engine/vk_check.h"
#include "vulkan_fixture.h"

namespace cubeforge::engine::testing {
namespace {

using ExportedMemory = VulkanTest;

TEST_F(ExportedMemory, ExportedFdImportsAsTheSameBytes) {
  if (!context_->has_external_memory_fd())
    GTEST_SKIP() << context_->device_name() << " has no VK_KHR_external_memory_fd";
  constexpr VkDeviceSize kSize = 1 << 20;
  constexpr VkBufferUsageFlags kUsage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  const int64_t allocations_before = context_->counters().allocations;
  auto exported = export_buffer(*context_, kSize, kUsage, "test buffer");
  ASSERT_TRUE(exported.ok()) << exported.error().to_string();
  ASSERT_GE(exported->fd, 0);
  struct stat info {};
  EXPECT_EQ(fstat(exported->fd, &info), 0) << "the fd is open";
  EXPECT_GE(exported->buffer.allocation_size(), kSize);
  EXPECT_EQ(context_->counters().allocations.load(), allocations_before + 1);

  // Import the fd into a second buffer, as cudaImportExternalMemory would.
  VkDevice device = context_->device();
  VkExternalMemoryBufferCreateInfo external_info{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
  external_info.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer_info.pNext = &external_info;
  buffer_info.size = kSize;
  buffer_info.usage = kUsage;
  VkBuffer imported_buffer;
  ASSERT_EQ(vkCreateBuffer(device, &buffer_info, nullptr, &imported_buffer), VK_SUCCESS);
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device, imported_buffer, &requirements);
  VkImportMemoryFdInfoKHR import_info{VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR};
  import_info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  import_info.fd = exported->fd;
  VkMemoryDedicatedAllocateInfo dedicated_info{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  dedicated_info.buffer = imported_buffer;
  if (exported->dedicated) import_info.pNext = &dedicated_info;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.pNext = &import_info;
  alloc.allocationSize = exported->buffer.allocation_size();
  alloc.memoryTypeIndex = uint32_t(context_->find_memory_type(requirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT));
  VkDeviceMemory imported_memory;
  VkResult imported = vkAllocateMemory(device, &alloc, nullptr, &imported_memory);
  if (imported != VK_SUCCESS) {
    close(exported->fd);  // only a successful import takes ownership
    vkDestroyBuffer(device, imported_buffer, nullptr);
    FAIL() << "importing the exported fd: " << vk_result_name(imported);
  }
  ASSERT_EQ(vkBindBufferMemory(device, imported_buffer, imported_memory, 0), VK_SUCCESS);

  auto host = Buffer::create(*context_, kSize, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true, "readback");
  ASSERT_TRUE(host.ok());
  const uint32_t pattern = 0x3f800000u;  // 1.0f
  context_->run_one_time([&](VkCommandBuffer cmd) {
    vkCmdFillBuffer(cmd, exported->buffer.handle(), 0, kSize, pattern);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                         nullptr, 0, nullptr);
    VkBufferCopy copy{0, 0, kSize};
    vkCmdCopyBuffer(cmd, imported_buffer, host->handle(), 1, &copy);
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr,
                         0, nullptr);
  });
  const auto* words = static_cast<const uint32_t*>(host->mapped());
  size_t mismatches = 0;
  for (size_t i = 0; i < kSize / 4; ++i) mismatches += words[i] != pattern;
  EXPECT_EQ(mismatches, 0u) << "the imported memory is the exported memory";

  vkDestroyBuffer(device, imported_buffer, nullptr);
  vkFreeMemory(device, imported_memory, nullptr);
}

}  // namespace
}  // namespace cubeforge::engine::testing
