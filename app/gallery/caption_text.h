// Captions drawn into an RGBA8 image with stb_easy_font's built-in bitmap
// font: the gallery needs a few lines of plain ASCII under each render, not a
// font stack, and easy_font needs no font file (Debian's libstb-dev ships it).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cubeforge::gallery {

struct Canvas {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;  // [height, width, 4], row 0 at the top

  Canvas(int w, int h, std::array<uint8_t, 3> fill);
  void fill_rect(int x0, int y0, int x1, int y1, std::array<uint8_t, 3> color);  // [x0, x1) x [y0, y1), clipped
};

// Width in font pixels (before scaling) of one line of text.
int text_width(const std::string& text);
// Line height in font pixels (before scaling).
constexpr int kLineHeight = 12;

// Splits text into lines no wider than max_width font pixels, at spaces where possible.
std::vector<std::string> wrap_text(const std::string& text, int max_width);

// Draws one line of text with its top-left corner at (x, y); each font pixel becomes scale x scale pixels.
void draw_text(Canvas& canvas, int x, int y, const std::string& text, int scale, std::array<uint8_t, 3> color);

}  // namespace cubeforge::gallery
