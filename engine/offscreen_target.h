// Offscreen render target: the viewport drawn into an image of a given size,
// with no window and no display (screenshots, turntables, tests, and the
// desktop app's "viewport in a panel" mode).
//
// After render() the single-sample colour image is in
// VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL, ready to be sampled by a later
// submission on the same queue (an ImGui image, through a descriptor set the
// app makes from color_view()). render_and_read() also copies the pixels (and,
// for single-sample targets, the depth buffer) back to the host.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/renderer.h"

namespace cubeforge::engine {

struct OffscreenOptions {
  uint32_t width = 256;
  uint32_t height = 256;
  // 0: 4x when supported. VK_SAMPLE_COUNT_1_BIT makes depth readable.
  VkSampleCountFlagBits samples = static_cast<VkSampleCountFlagBits>(0);
};

struct RenderedImage {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgba;  // [H, W, 4], row 0 at the top; alpha is mesh coverage
  std::vector<float> depth;   // [H, W] in [0,1] (1 = far/background); empty unless asked
};

class OffscreenTarget {
 public:
  static Result<std::unique_ptr<OffscreenTarget>> create(Renderer& renderer, const OffscreenOptions& options);
  ~OffscreenTarget();
  OffscreenTarget(const OffscreenTarget&) = delete;
  OffscreenTarget& operator=(const OffscreenTarget&) = delete;

  // Recreates the images at a new size (waits for the GPU first).
  Status resize(uint32_t width, uint32_t height);

  // Draws without waiting; returns the GPU-timeline value of the submission.
  Result<uint64_t> render(const OrbitCamera& camera, const SceneSettings& settings,
                          const OverlayRecorder& overlay = {});
  // Draws, waits and reads the result back.
  Result<RenderedImage> render_and_read(const OrbitCamera& camera, const SceneSettings& settings,
                                        bool read_depth = false);

  VkImageView color_view() const { return resolved_.view(); }
  VkImage color_image() const { return resolved_.handle(); }
  VkImageLayout color_layout() const { return VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL; }
  VkRenderPass render_pass() const { return render_pass_; }
  VkFormat color_format() const { return kColorFormat; }
  VkSampleCountFlagBits samples() const { return samples_; }
  VkExtent2D extent() const { return extent_; }
  Renderer& renderer() { return renderer_; }

  static constexpr VkFormat kColorFormat = VK_FORMAT_R8G8B8A8_UNORM;

 private:
  OffscreenTarget(Renderer& renderer) : renderer_(renderer), context_(renderer.context()) {}
  Status create_images();
  void destroy_images();
  Result<uint64_t> render_internal(const OrbitCamera& camera, const SceneSettings& settings,
                                   const OverlayRecorder& overlay, bool read_color, bool read_depth);

  Renderer& renderer_;
  Context& context_;
  VkExtent2D extent_{};
  VkSampleCountFlagBits samples_ = VK_SAMPLE_COUNT_1_BIT;
  VkRenderPass render_pass_ = VK_NULL_HANDLE;
  Image multisampled_;  // only when samples_ > 1
  Image resolved_;      // single-sample colour result
  Image depth_;
  VkFramebuffer framebuffer_ = VK_NULL_HANDLE;
  Buffer readback_;     // RGBA8 then f32 depth
};

}  // namespace cubeforge::engine
