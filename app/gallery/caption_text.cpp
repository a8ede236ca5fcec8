// stb_easy_font turns text into axis-aligned quads (four vertices of x, y, z
// and a colour, 16 bytes each); filling those rectangles is the whole renderer.
#include "app/gallery/caption_text.h"

#include <stb_easy_font.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cubeforge::gallery {

Canvas::Canvas(int w, int h, std::array<uint8_t, 3> fill) : width(w), height(h), rgba(size_t(w) * h * 4) {
  fill_rect(0, 0, w, h, fill);
}

void Canvas::fill_rect(int x0, int y0, int x1, int y1, std::array<uint8_t, 3> color) {
  x0 = std::clamp(x0, 0, width), x1 = std::clamp(x1, 0, width);
  y0 = std::clamp(y0, 0, height), y1 = std::clamp(y1, 0, height);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      uint8_t* p = &rgba[(size_t(y) * width + x) * 4];
      p[0] = color[0], p[1] = color[1], p[2] = color[2], p[3] = 255;
    }
}

int text_width(const std::string& text) {
  std::string copy = text;  // easy_font takes a mutable pointer
  return stb_easy_font_width(copy.data());
}

std::vector<std::string> wrap_text(const std::string& text, int max_width) {
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);
    start = end + 1;
    std::string candidate = line.empty() ? word : line + " " + word;
    if (!line.empty() && text_width(candidate) > max_width) {
      lines.push_back(line);
      line = word;
    } else {
      line = candidate;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

void draw_text(Canvas& canvas, int x, int y, const std::string& text, int scale, std::array<uint8_t, 3> color) {
  struct Vertex {
    float x, y, z;
    unsigned char rgba[4];
  };
  static_assert(sizeof(Vertex) == 16, "stb_easy_font writes 16-byte vertices");
  // The header expects about 270 bytes (17 vertices) per character on average; easy_font stops
  // at the buffer's end, so leave room for the densest glyphs.
  std::vector<Vertex> quads((text.size() + 1) * 64);
  std::string copy = text;
  const int quad_count = stb_easy_font_print(0.f, 0.f, copy.data(), nullptr, quads.data(),
                                             static_cast<int>(quads.size() * sizeof(Vertex)));
  for (int q = 0; q < quad_count; ++q) {
    const Vertex* v = &quads[size_t(q) * 4];
    float x0 = v[0].x, y0 = v[0].y, x1 = v[0].x, y1 = v[0].y;
    for (int k = 1; k < 4; ++k) {
      x0 = std::min(x0, v[k].x), x1 = std::max(x1, v[k].x);
      y0 = std::min(y0, v[k].y), y1 = std::max(y1, v[k].y);
    }
    canvas.fill_rect(x + int(std::lround(x0 * scale)), y + int(std::lround(y0 * scale)),
                     x + int(std::lround(x1 * scale)), y + int(std::lround(y1 * scale)), color);
  }
}

}  // namespace cubeforge::gallery
