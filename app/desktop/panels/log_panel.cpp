// The Log panel along the bottom (errors in red, following the newest line
// unless scrolled up), and the popup that shows a person each error.
#include <algorithm>

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
    // Every error since the popup was last closed, newest last.
    const float most = ImGui::GetIO().DisplaySize.y * 0.6f;
    ImGui::BeginChild("errors", ImVec2(ImGui::GetFontSize() * 34, std::min(most, ImGui::GetTextLineHeightWithSpacing() *
                                                                                  (2.f + 2.f * log.popup_messages.size()))));
    ImGui::PushTextWrapPos(0.f);
    for (const std::string& message : log.popup_messages) {
      ImGui::TextUnformatted(message.c_str());
      ImGui::Separator();
    }
    ImGui::PopTextWrapPos();
    ImGui::SetScrollHereY(1.f);
    ImGui::EndChild();
    if (ImGui::Button("OK")) {
      log.popup_messages.clear();
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
  }
}

}  // namespace cubeforge::app
