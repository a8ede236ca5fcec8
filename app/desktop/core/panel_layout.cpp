// The panels' places for a window size: see panel_layout.h.
#include "app/desktop/core/panel_layout.h"

#include <algorithm>

namespace cubeforge::app {

namespace {
constexpr float kMargin = 8.f;
// The export panel's rows (folder and whose it is, name, formats, outcome, view switches) at the default font.
constexpr float kExportHeight = 220.f;
}  // namespace

const char* panel_title(Panel panel) {
  switch (panel) {
    case Panel::kGenerate: return "Generate";
    case Panel::kStatistics: return "Live statistics";
    case Panel::kHistory: return "History";
    case Panel::kExport: return "Export and view";
    case Panel::kLog: return "Log";
  }
  return "?";
}

PanelLayout layout_panels(float window_width, float window_height, bool panels_hidden) {
  const float W = std::max(window_width, 1.f), H = std::max(window_height, 1.f), m = kMargin;
  PanelLayout layout;
  if (panels_hidden) {
    layout.free_view = {0, 0, W, H};
    return layout;
  }
  // Side columns a fixed share of the width within readable bounds, but never
  // so wide that less than 30% of the window stays free between them.
  const float log_height = std::clamp(H * 0.14f, 70.f, 170.f);
  const float side = std::max(60.f, std::min(std::clamp(W * 0.23f, 250.f, 400.f), (W * 0.7f - 4 * m) / 2));
  const float column = std::max(60.f, H - log_height - 3 * m);
  const float export_height = std::min(kExportHeight, column * 0.4f);
  const float history_height = (column - export_height - 2 * m) * 0.4f;
  const float statistics_height = column - export_height - history_height - 2 * m;
  const float right_x = W - side - m;

  auto set = [&](Panel panel, Rect rect) { layout.panels[static_cast<int>(panel)] = rect; };
  set(Panel::kGenerate, {m, m, side, column});
  set(Panel::kStatistics, {right_x, m, side, statistics_height});
  set(Panel::kHistory, {right_x, m + statistics_height + m, side, history_height});
  set(Panel::kExport, {right_x, m + statistics_height + m + history_height + m, side, export_height});
  set(Panel::kLog, {m, H - log_height - m, W - 2 * m, log_height});
  layout.free_view = {side + 2 * m, 0, std::max(1.f, W - 2 * side - 4 * m), std::max(1.f, H - log_height - 2 * m)};
  return layout;
}

Rect keep_inside(Rect rect, float window_width, float window_height) {
  rect.width = std::min(rect.width, window_width);
  rect.height = std::min(rect.height, window_height);
  rect.x = std::clamp(rect.x, 0.f, std::max(0.f, window_width - rect.width));
  rect.y = std::clamp(rect.y, 0.f, std::max(0.f, window_height - rect.height));
  return rect;
}

}  // namespace cubeforge::app
