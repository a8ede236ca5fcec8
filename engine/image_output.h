// Screenshots and turntables to PNG (stb_image_write).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/offscreen_target.h"
#include "inference/core/result.h"

namespace cubeforge::engine {

// Encodes RGBA8 pixels ([height, width, 4], row 0 at the top) as a PNG file's bytes.
Result<std::vector<std::byte>> encode_png(const uint8_t* rgba, uint32_t width, uint32_t height);

// Writes RGBA8 as PNG, atomically (a failed write leaves any old file as it was).
// With transparent_background the alpha channel (mesh
// coverage) is kept; otherwise the image is made opaque.
Status write_png(const RenderedImage& image, const std::string& path, bool transparent_background = false);

// Renders the current mesh and writes it to `path`.
Status save_screenshot(OffscreenTarget& target, const OrbitCamera& camera, const SceneSettings& settings,
                       const std::string& path, bool transparent_background = false);

struct TurntableOptions {
  int frame_count = 36;             // one full turn
  float pitch_degrees = 20.f;
  std::string path_pattern = "turntable_%03d.png";  // printf pattern with one integer: the frame number
};

// Frames the mesh, then renders frame_count views at evenly spaced yaw angles.
// Returns the number of files written.
Result<int> save_turntable(OffscreenTarget& target, const SceneSettings& settings, const TurntableOptions& options);

}  // namespace cubeforge::engine
