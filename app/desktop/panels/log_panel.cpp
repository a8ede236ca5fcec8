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
  // Scripts log errors and go on (unless they ask to see the popup); a person
  // gets a message box as well.
  if (log.popup_pending && (!app.state.script_mode || log.popup_in_scripts)) {
    ImGui::OpenPopup("Error");
    log.popup_pending = false;
  }
  log.popup_open = false;
  if (ImGui::BeginPopupModal("Error", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    log.popup_open = true;
    // Every error since the popup was last closed, newest last. It opens at
    // the top, and scrolls to the top of an error that arrives while it is
    // open: a message gives its cause first and its hints last.
    const float most = ImGui::GetIO().DisplaySize.y * 0.6f;
    ImGui::BeginChild("errors", ImVec2(ImGui::GetFontSize() * 34, std::min(most, ImGui::GetTextLineHeightWithSpacing() *
                                                                                  (2.f + 2.f * log.popup_messages.size()))));
    ImGui::PushTextWrapPos(0.f);
    log.popup_shown = std::min(log.popup_shown, log.popup_messages.size());
    for (size_t i = 0; i < log.popup_messages.size(); ++i) {
      if (i == log.popup_shown) ImGui::SetScrollHereY(0.f);
      ImGui::TextUnformatted(log.popup_messages[i].c_str());
      ImGui::Separator();
    }
    log.popup_shown = log.popup_messages.size();
    ImGui::PopTextWrapPos();
    log.popup_scroll = ImGui::GetScrollY();
    log.popup_scroll_max = ImGui::GetScrollMaxY();
    ImGui::EndChild();
    if (ImGui::Button("OK")) {
      log.popup_messages.clear();
      log.popup_shown = 0;
      ImGui::CloseCurrentPopup();
    }
    remember_item(app, "error-ok");
    ImGui::EndPopup();
  }
}

}  // namespace cubeforge::app
