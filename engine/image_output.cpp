// PNG output through libstb's stb_image_write.
#include "engine/image_output.h"

#include <stb_image_write.h>

#include <cstdio>
#include <vector>

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
  int ok = stbi_write_png(path.c_str(), static_cast<int>(image.width), static_cast<int>(image.height), 4,
                          pixels->data(), static_cast<int>(image.width * 4));
  if (!ok)
    return make_error(ErrorCode::kIo, "write_png: could not write " + path + " (does the folder exist and is it writable?)");
  return ok_status();
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
