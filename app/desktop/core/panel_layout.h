// Where the desktop app's panels go for a window size, and what is left free
// for the 3D view.
//
// The layout is computed, never remembered: at start, whenever the window
// changes size, on "Reset layout" and when the panels are shown again, every
// panel is put at its place for the current size. Between those moments a
// person may move or resize panels; keep_inside() brings one back whenever
// it would leave the window. So no window size, however small, and no saved
// arrangement can leave a panel off-screen or piled on another.
//
//   +-----------+----------------------+------------+
//   | Generate  |                      | Statistics |
//   | (prompt,  |   free: the object   +------------+
//   | settings) |   is framed here     | History    |
//   |           |                      +------------+
//   |           |                      | Export     |
//   +-----------+----------------------+------------+
//   | Log                                           |
//   +-----------------------------------------------+
#pragma once

#include <array>

namespace cubeforge::app {

struct Rect {
  float x = 0, y = 0, width = 0, height = 0;
  float right() const { return x + width; }
  float bottom() const { return y + height; }
  bool overlaps(const Rect& other) const {
    return x < other.right() && other.x < right() && y < other.bottom() && other.y < bottom();
  }
  bool inside(float window_width, float window_height) const {
    return x >= 0 && y >= 0 && right() <= window_width && bottom() <= window_height;
  }
};

enum class Panel { kGenerate, kStatistics, kHistory, kExport, kLog };
constexpr int kPanelCount = 5;
// The panel's window title (its ImGui name).
const char* panel_title(Panel panel);

struct PanelLayout {
  std::array<Rect, kPanelCount> panels;
  Rect free_view;  // the part of the window no panel covers
  const Rect& operator[](Panel panel) const { return panels[static_cast<int>(panel)]; }
};

// panels_hidden: the free view is the whole window.
PanelLayout layout_panels(float window_width, float window_height, bool panels_hidden = false);

// `rect` moved (and shrunk if it must be) so that it lies inside the window.
Rect keep_inside(Rect rect, float window_width, float window_height);

}  // namespace cubeforge::app
