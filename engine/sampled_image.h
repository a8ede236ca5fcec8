// A descriptor set that lets a fragment shader sample an offscreen target's
// colour image: set layout {binding 0: combined image sampler, fragment stage}.
//
// That is the layout newer Dear ImGui Vulkan backends bind for an
// ImTextureID (ImGui::Image((ImTextureID)descriptor_set(), size)). Debian's
// ImGui 1.86 backend does not: it binds its font set for every draw command
// ("User texture binding ... aren't supported" in its header), so with that
// version the desktop app draws the viewport in the window's own pass and this
// set serves renderers of our own that sample the offscreen image.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>

#include "engine/context.h"
#include "inference/core/result.h"

namespace cubeforge::engine {

class SampledImage {
 public:
  // `view` must be in VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL when sampled
  // (OffscreenTarget::color_view() after render()).
  static Result<std::unique_ptr<SampledImage>> create(Context& context, VkImageView view);
  ~SampledImage();
  SampledImage(const SampledImage&) = delete;
  SampledImage& operator=(const SampledImage&) = delete;

  // Points the set at a new view (after OffscreenTarget::resize). Waits for the
  // GPU first, since frames in flight may still read the set.
  void set_view(VkImageView view);
  VkDescriptorSet descriptor_set() const { return set_; }
  VkDescriptorSetLayout layout() const { return layout_; }

 private:
  explicit SampledImage(Context& context) : context_(context) {}
  Context& context_;
  VkSampler sampler_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout layout_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
};

}  // namespace cubeforge::engine
