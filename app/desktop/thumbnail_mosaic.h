// A history thumbnail (PNG on disk) drawn as a small mosaic of coloured cells
// with ImGui's draw list. Debian's ImGui 1.86 Vulkan backend binds only its
// font texture (user textures arrived in later versions), so the image is
// box-filtered down to cells that need no texture at all.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge::app {

struct ThumbnailMosaic {
  int cells = 0;                 // cells per side
  std::vector<uint32_t> colors;  // [cells, cells] as ImU32 (0xAABBGGRR), row 0 at the top
};

Result<ThumbnailMosaic> load_thumbnail_mosaic(const std::filesystem::path& png, int cells);
// The same from RGBA pixels in memory ([height, width, 4], row 0 at the top).
ThumbnailMosaic mosaic_from_pixels(const uint8_t* rgba, int width, int height, int cells);

}  // namespace cubeforge::app
