// History thumbnails as ImGui textures: see thumbnail_texture.h.
#include "app/desktop/thumbnail_texture.h"

#include <stb_image.h>

#include <cstring>

namespace cubeforge::app {

Result<std::unique_ptr<ThumbnailTexture>> ThumbnailTexture::load(engine::Context& context,
                                                                 const std::filesystem::path& path) {
  int width = 0, height = 0, channels = 0;
  stbi_uc* pixels = stbi_load(path.c_str(), &width, &height, &channels, 4);
  if (!pixels)
    return make_error(ErrorCode::kCorruptFile, "thumbnail '" + path.string() + "' is not a readable PNG (" +
                                                   (stbi_failure_reason() ? stbi_failure_reason() : "unknown") + ")");
  std::unique_ptr<stbi_uc, void (*)(void*)> owned(pixels, stbi_image_free);
  const VkDeviceSize bytes = VkDeviceSize(width) * height * 4;

  std::unique_ptr<ThumbnailTexture> texture(new ThumbnailTexture());
  texture->width_ = width;
  texture->height_ = height;
  engine::ImageDescription description;
  description.extent = {uint32_t(width), uint32_t(height)};
  description.format = VK_FORMAT_R8G8B8A8_UNORM;
  description.usage = VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT;
  CUBEFORGE_ASSIGN_OR_RETURN(texture->image_, engine::Image::create(context, description, "history thumbnail"));
  CUBEFORGE_ASSIGN_OR_RETURN(
      engine::Buffer staging,
      engine::Buffer::create(context, bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true, "history thumbnail staging"));
  std::memcpy(staging.mapped(), pixels, bytes);

  VkImage image = texture->image_.handle();
  context.run_one_time([&](VkCommandBuffer cmd) {
    VkImageMemoryBarrier to_transfer{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    to_transfer.srcAccessMask = 0;
    to_transfer.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    to_transfer.oldLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    to_transfer.newLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
    to_transfer.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    to_transfer.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    to_transfer.image = image;
    to_transfer.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 0,
                         nullptr, 1, &to_transfer);
    VkBufferImageCopy region{};
    region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    region.imageExtent = {uint32_t(width), uint32_t(height), 1};
    vkCmdCopyBufferToImage(cmd, staging.handle(), image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &region);
    VkImageMemoryBarrier to_shader = to_transfer;
    to_shader.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    to_shader.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    to_shader.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
    to_shader.newLayout = VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, 0, 0, nullptr,
                         0, nullptr, 1, &to_shader);
  });
  CUBEFORGE_ASSIGN_OR_RETURN(texture->sampled_, engine::SampledImage::create(context, texture->image_.view()));
  return texture;
}

}  // namespace cubeforge::app
