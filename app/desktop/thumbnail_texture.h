// A history thumbnail (PNG on disk) as something ImGui can draw: the pixels
// uploaded into a sampled Vulkan image, with the engine's SampledImage
// descriptor set as the ImTextureID (Debian's ImGui 1.86 has no AddTexture).
#pragma once

#include <filesystem>
#include <memory>

#include "engine/context.h"
#include "engine/gpu_resources.h"
#include "engine/sampled_image.h"
#include "inference/core/result.h"

namespace cubeforge::app {

class ThumbnailTexture {
 public:
  // Reads the PNG and uploads it (waits for the copy; thumbnails are small).
  static Result<std::unique_ptr<ThumbnailTexture>> load(engine::Context& context, const std::filesystem::path& path);
  void* texture_id() const { return reinterpret_cast<void*>(sampled_->descriptor_set()); }
  int width() const { return width_; }
  int height() const { return height_; }

 private:
  ThumbnailTexture() = default;
  engine::Image image_;
  std::unique_ptr<engine::SampledImage> sampled_;
  int width_ = 0, height_ = 0;
};

}  // namespace cubeforge::app
