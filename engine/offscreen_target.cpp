// Offscreen images, readback copies and the final layout transition.
#include "engine/offscreen_target.h"

#include <cstring>

#include "engine/vk_check.h"

namespace cubeforge::engine {
namespace {

Status check_size(uint32_t width, uint32_t height) {
  if (width == 0 || height == 0 || width > 16384 || height > 16384)
    return make_error(ErrorCode::kInvalidArgument, "offscreen target: size " + std::to_string(width) + "x" +
                                                       std::to_string(height) + " must be 1..16384 each way");
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<OffscreenTarget>> OffscreenTarget::create(Renderer& renderer, const OffscreenOptions& options) {
  CUBEFORGE_TRY(check_size(options.width, options.height));
  std::unique_ptr<OffscreenTarget> target(new OffscreenTarget(renderer));
  target->extent_ = {options.width, options.height};
  target->samples_ = choose_samples(renderer.context(), options.samples);
  CUBEFORGE_ASSIGN_OR_RETURN(target->render_pass_,
                             create_scene_render_pass(renderer.context(), kColorFormat, target->samples_,
                                                      VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL));
  CUBEFORGE_TRY(renderer.prepare({target->render_pass_, VK_NULL_HANDLE, {}, kColorFormat, target->samples_}));
  CUBEFORGE_TRY(target->create_images());
  return target;
}

OffscreenTarget::~OffscreenTarget() {
  context_.wait_idle();
  destroy_images();
  if (render_pass_) vkDestroyRenderPass(context_.device(), render_pass_, nullptr);
}

void OffscreenTarget::destroy_images() {
  if (framebuffer_) vkDestroyFramebuffer(context_.device(), framebuffer_, nullptr);
  framebuffer_ = VK_NULL_HANDLE;
  multisampled_.reset();
  resolved_.reset();
  depth_.reset();
  readback_.reset();
}

Status OffscreenTarget::create_images() {
  const bool multisampled = samples_ != VK_SAMPLE_COUNT_1_BIT;
  if (multisampled) {
    CUBEFORGE_ASSIGN_OR_RETURN(
        multisampled_, Image::create(context_,
                                     {extent_, kColorFormat,
                                      VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSIENT_ATTACHMENT_BIT,
                                      samples_, VK_IMAGE_ASPECT_COLOR_BIT},
                                     "offscreen multisampled colour"));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(
      resolved_, Image::create(context_,
                               {extent_, kColorFormat,
                                VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT |
                                    VK_IMAGE_USAGE_SAMPLED_BIT,
                                VK_SAMPLE_COUNT_1_BIT, VK_IMAGE_ASPECT_COLOR_BIT},
                               "offscreen colour"));
  VkImageUsageFlags depth_usage = VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT;
  if (!multisampled) depth_usage |= VK_IMAGE_USAGE_TRANSFER_SRC_BIT;
  CUBEFORGE_ASSIGN_OR_RETURN(depth_, Image::create(context_,
                                                   {extent_, context_.depth_format(), depth_usage, samples_,
                                                    VK_IMAGE_ASPECT_DEPTH_BIT},
                                                   "offscreen depth"));
  std::vector<VkImageView> views;
  views.push_back(multisampled ? multisampled_.view() : resolved_.view());
  views.push_back(depth_.view());
  if (multisampled) views.push_back(resolved_.view());
  VkFramebufferCreateInfo info{VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO};
  info.renderPass = render_pass_;
  info.attachmentCount = static_cast<uint32_t>(views.size());
  info.pAttachments = views.data();
  info.width = extent_.width;
  info.height = extent_.height;
  info.layers = 1;
  VK_TRY("offscreen target", vkCreateFramebuffer(context_.device(), &info, nullptr, &framebuffer_), "framebuffer");
  VkDeviceSize pixels = VkDeviceSize(extent_.width) * extent_.height;
  CUBEFORGE_ASSIGN_OR_RETURN(readback_, Buffer::create(context_, pixels * 4 + pixels * sizeof(float),
                                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT, true, "offscreen readback"));
  return ok_status();
}

Status OffscreenTarget::resize(uint32_t width, uint32_t height) {
  CUBEFORGE_TRY(check_size(width, height));
  if (width == extent_.width && height == extent_.height) return ok_status();
  context_.wait_idle();
  destroy_images();
  extent_ = {width, height};
  return create_images();
}

Result<uint64_t> OffscreenTarget::render_internal(const OrbitCamera& camera, const SceneSettings& settings,
                                                  const OverlayRecorder& overlay, bool read_color, bool read_depth) {
  if (read_depth && samples_ != VK_SAMPLE_COUNT_1_BIT)
    return make_error(ErrorCode::kUnsupported,
                      "offscreen target: depth readback needs a single-sample target (OffscreenOptions::samples = 1)");
  FrameResources& frame = renderer_.acquire_frame();
  RenderPassTarget target{render_pass_, framebuffer_, extent_, kColorFormat, samples_};
  VkImage color = resolved_.handle();
  VkImage depth = depth_.handle();
  VkBuffer readback = readback_.handle();
  VkExtent2D extent = extent_;
  auto after_pass = [=](VkCommandBuffer cmd) {
    VkBufferImageCopy region{};
    region.imageExtent = {extent.width, extent.height, 1};
    if (read_color) {
      region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
      vkCmdCopyImageToBuffer(cmd, color, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback, 1, &region);
    }
    if (read_depth) {
      VkImageMemoryBarrier to_transfer{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
      to_transfer.srcAccessMask = VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT;
      to_transfer.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
      to_transfer.oldLayout = VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL;
      to_transfer.newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
      to_transfer.srcQueueFamilyIndex = to_transfer.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
      to_transfer.image = depth;
      to_transfer.subresourceRange = {VK_IMAGE_ASPECT_DEPTH_BIT, 0, 1, 0, 1};
      vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0,
                           nullptr, 0, nullptr, 1, &to_transfer);
      region.bufferOffset = VkDeviceSize(extent.width) * extent.height * 4;
      region.imageSubresource = {VK_IMAGE_ASPECT_DEPTH_BIT, 0, 0, 1};
      vkCmdCopyImageToBuffer(cmd, depth, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback, 1, &region);
    }
    // Ready to be sampled by a later submission (the app's panel).
    VkImageMemoryBarrier to_sampled{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    // Colour writes were made available to the transfer stage by the render
    // pass's outgoing dependency; this barrier chains on from there.
    to_sampled.srcAccessMask = 0;
    to_sampled.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    to_sampled.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
    to_sampled.newLayout = VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL;
    to_sampled.srcQueueFamilyIndex = to_sampled.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    to_sampled.image = color;
    to_sampled.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkMemoryBarrier host_read{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    host_read.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    host_read.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host_read, 0,
                         nullptr, 1, &to_sampled);
  };
  CUBEFORGE_TRY(renderer_.record(frame, target, camera, settings, overlay, after_pass));
  return renderer_.submit(frame, {}, {});
}

Result<uint64_t> OffscreenTarget::render(const OrbitCamera& camera, const SceneSettings& settings,
                                         const OverlayRecorder& overlay) {
  return render_internal(camera, settings, overlay, false, false);
}

Result<RenderedImage> OffscreenTarget::render_and_read(const OrbitCamera& camera, const SceneSettings& settings,
                                                       bool read_depth) {
  CUBEFORGE_ASSIGN_OR_RETURN(uint64_t value, render_internal(camera, settings, {}, true, read_depth));
  context_.wait_for(value);
  RenderedImage image;
  image.width = extent_.width;
  image.height = extent_.height;
  size_t pixels = size_t(extent_.width) * extent_.height;
  const auto* bytes = static_cast<const uint8_t*>(readback_.mapped());
  image.rgba.assign(bytes, bytes + pixels * 4);
  if (read_depth) {
    image.depth.resize(pixels);
    std::memcpy(image.depth.data(), bytes + pixels * 4, pixels * sizeof(float));
  }
  return image;
}

}  // namespace cubeforge::engine
