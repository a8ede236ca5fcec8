// History thumbnails as mosaics: see thumbnail_mosaic.h.
#include "app/desktop/thumbnail_mosaic.h"

#include <stb_image.h>

#include <memory>

namespace cubeforge::app {

Result<ThumbnailMosaic> load_thumbnail_mosaic(const std::filesystem::path& png, int cells) {
  int width = 0, height = 0, channels = 0;
  stbi_uc* pixels = stbi_load(png.c_str(), &width, &height, &channels, 4);
  if (!pixels)
    return make_error(ErrorCode::kCorruptFile, "thumbnail '" + png.string() + "' is not a readable PNG (" +
                                                   (stbi_failure_reason() ? stbi_failure_reason() : "unknown") + ")");
  std::unique_ptr<stbi_uc, void (*)(void*)> owned(pixels, stbi_image_free);
  if (width < cells || height < cells)
    return make_error(ErrorCode::kCorruptFile, "thumbnail '" + png.string() + "' is smaller than its mosaic");
  return mosaic_from_pixels(pixels, width, height, cells);
}

ThumbnailMosaic mosaic_from_pixels(const uint8_t* pixels, int width, int height, int cells) {
  ThumbnailMosaic mosaic;
  if (cells <= 0 || width < cells || height < cells) return mosaic;
  mosaic.cells = cells;
  mosaic.colors.resize(size_t(cells) * cells);
  for (int cy = 0; cy < cells; ++cy) {
    for (int cx = 0; cx < cells; ++cx) {
      const int x0 = cx * width / cells, x1 = (cx + 1) * width / cells;
      const int y0 = cy * height / cells, y1 = (cy + 1) * height / cells;
      uint64_t sum[3] = {0, 0, 0};
      for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x)
          for (int c = 0; c < 3; ++c) sum[c] += pixels[(size_t(y) * width + x) * 4 + c];
      const uint64_t count = uint64_t(x1 - x0) * (y1 - y0);
      uint32_t r = uint32_t(sum[0] / count), g = uint32_t(sum[1] / count), b = uint32_t(sum[2] / count);
      mosaic.colors[size_t(cy) * cells + cx] = 0xFF000000u | (b << 16) | (g << 8) | r;
    }
  }
  return mosaic;
}

}  // namespace cubeforge::app
