// The Log panel along the bottom (errors in red, following the newest line
// unless scrolled up), and the popup that shows a person each error.
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

void draw_log_panel(App& app) {
  begin_panel(app, Panel::kLog);
  ImGui::PushTextWrapPos(0.f);  // long lines wrap at the panel's edge
  for (const LogLine& line : app.state.log.lines) {
    if (line.error) ImGui::TextColored(kErrorTextColour, "%s", line.text.c_str());
    else ImGui::TextUnformatted(line.text.c_str());
  }
  ImGui::PopTextWrapPos();
  if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4) ImGui::SetScrollHereY(1.f);
  ImGui::End();
}

void draw_error_popup(App& app) {
  AppLog& log = app.state.log;
  // Scripts log errors and go on; a person gets a message box as well.
  if (log.popup_pending && !app.state.script_mode) {
    ImGui::OpenPopup("Error");
    log.popup_pending = false;
  }
  if (ImGui::BeginPopupModal("Error", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::PushTextWrapPos(480.f);
    ImGui::TextUnformatted(log.popup_message.c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::Button("OK")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

}  // namespace cubeforge::app
