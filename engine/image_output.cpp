// PNG output through libstb's stb_image_write.
#include "engine/image_output.h"

#include <stb_image_write.h>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "inference/core/file_io.h"

namespace cubeforge::engine {

Status write_png(const RenderedImage& image, const std::string& path, bool transparent_background) {
  if (image.width == 0 || image.height == 0 || image.rgba.size() != size_t(image.width) * image.height * 4)
    return make_error(ErrorCode::kInvalidArgument, "write_png " + path + ": the image is empty or inconsistent");
  const std::vector<uint8_t>* pixels = &image.rgba;
  std::vector<uint8_t> opaque;
  if (!transparent_background) {
    opaque = image.rgba;
    for (size_t i = 3; i < opaque.size(); i += 4) opaque[i] = 255;
    pixels = &opaque;
  }
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<std::byte> png, encode_png(pixels->data(), image.width, image.height));
  return write_file_atomically(path, std::span<const std::byte>(png));
}

Result<std::vector<std::byte>> encode_png(const uint8_t* rgba, uint32_t width, uint32_t height) {
  std::vector<std::byte> png;
  auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<std::byte>*>(context);
    const auto* bytes = static_cast<const std::byte*>(data);
    out->insert(out->end(), bytes, bytes + size);
  };
  if (width == 0 || height == 0 ||
      !stbi_write_png_to_func(append, &png, static_cast<int>(width), static_cast<int>(height), 4, rgba,
                              static_cast<int>(width * 4)))
    return make_error(ErrorCode::kInternal, "could not encode a " + std::to_string(width) + "x" +
                                                std::to_string(height) + " image as PNG");
  return png;
}

Status save_screenshot(OffscreenTarget& target, const OrbitCamera& camera, const SceneSettings& settings,
                       const std::string& path, bool transparent_background) {
  CUBEFORGE_ASSIGN_OR_RETURN(RenderedImage image, target.render_and_read(camera, settings));
  return write_png(image, path, transparent_background);
}

Result<int> save_turntable(OffscreenTarget& target, const SceneSettings& settings, const TurntableOptions& options) {
  if (options.frame_count <= 0)
    return make_error(ErrorCode::kInvalidArgument, "turntable: frame_count must be positive");
  OrbitCamera camera;
  camera.pitch_degrees = options.pitch_degrees;
  float aspect = float(target.extent().width) / float(target.extent().height);
  // Frame from the renderer's current mesh; the camera keeps its distance as it turns.
  camera.frame(target.renderer().mesh_bounds(), aspect);
  for (int i = 0; i < options.frame_count; ++i) {
    camera.yaw_degrees = 360.f * float(i) / float(options.frame_count);
    char path[4096];
    std::snprintf(path, sizeof(path), options.path_pattern.c_str(), i);
    CUBEFORGE_TRY(save_screenshot(target, camera, settings, path));
  }
  return options.frame_count;
}

}  // namespace cubeforge::engine
