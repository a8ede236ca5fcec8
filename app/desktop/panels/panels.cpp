// The panels in drawing order, and what they share. See panels.h.
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

void draw_panels(App& app) {
  draw_generate_panel(app);
  draw_statistics_panel(app);
  draw_history_panel(app);
  draw_export_panel(app);
  draw_log_panel(app);
  draw_error_popup(app);
}

void reason_tooltip(const std::string& text) {
  if (!text.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", text.c_str());
}

}  // namespace cubeforge::app
