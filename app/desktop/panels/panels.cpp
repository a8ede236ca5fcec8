// The panels in drawing order, and what they share. See panels.h.
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// With the panels hidden, one line says how to bring them back.
void draw_hidden_hint() {
  ImGui::SetNextWindowPos(ImVec2(8, 8));
  ImGui::SetNextWindowBgAlpha(0.5f);
  ImGui::Begin("##hidden", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoInputs);
  ImGui::TextUnformatted("Tab shows the panels, F frames the object");
  ImGui::End();
}

}  // namespace

void draw_panels(App& app) {
  LayoutState& layout = app.state.layout;
  layout.texts.clear();  // this frame's panels record what they show
  layout.refusals.clear();
  if (layout.place_panels_next_frame) {
    layout.place_panels = true;
    layout.place_panels_next_frame = false;
  }
  if (layout.panels_hidden) {
    draw_hidden_hint();
  } else {
    draw_generate_panel(app);
    draw_statistics_panel(app);
    draw_history_panel(app);
    draw_export_panel(app);
    draw_log_panel(app);
    draw_candidates_panel(app);
  }
  draw_latency_panel(app);
  draw_error_popup(app);
  // The loose pieces choice, clicked above or set by a script, reaches the view.
  app.apply_loose_pieces_setting();
  layout.place_panels = false;
}

bool begin_panel(App& app, Panel panel, ImGuiWindowFlags flags) {
  const LayoutState& layout = app.state.layout;
  const Rect& place = layout.layout[panel];
  const ImGuiCond when = layout.place_panels ? ImGuiCond_Always : ImGuiCond_FirstUseEver;
  ImGui::SetNextWindowPos(ImVec2(place.x, place.y), when);
  ImGui::SetNextWindowSize(ImVec2(place.width, place.height), when);
  if (layout.place_panels) ImGui::SetNextWindowCollapsed(false, ImGuiCond_Always);
  const bool open = ImGui::Begin(panel_title(panel), nullptr, flags);
  // Wherever a person dragged or stretched it, it stays inside the window.
  const ImVec2 position = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  const Rect now{position.x, position.y, size.x, size.y};
  const Rect kept = keep_inside(now, layout.width, layout.height);
  if (kept.x != now.x || kept.y != now.y) ImGui::SetWindowPos(ImVec2(kept.x, kept.y));
  if (kept.width != now.width || kept.height != now.height) ImGui::SetWindowSize(ImVec2(kept.width, kept.height));
  return open;
}

void remember_item(App& app, const std::string& name) {
  const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
  app.state.layout.targets[name] = Rect{min.x, min.y, max.x - min.x, max.y - min.y};
}

void remember_refusal(App& app, const std::string& name, const std::string& reason) {
  if (!reason.empty()) app.state.layout.refusals[name] = reason;
}

void remember_text(App& app, const std::string& name, const std::string& text) {
  app.state.layout.texts[name] = text;
}

void flow_next(float width) {
  const float right = ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width;
  if (right <= ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x) ImGui::SameLine();
}

float button_width(const char* label) {
  return ImGui::CalcTextSize(label, nullptr, true).x + 2 * ImGui::GetStyle().FramePadding.x;
}

float checkbox_width(const char* label) {
  return ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label, nullptr, true).x;
}

void draw_mosaic(const ThumbnailMosaic& mosaic, ImVec2 origin, float size) {
  if (mosaic.cells == 0) return;
  const float cell = size / mosaic.cells;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (int y = 0; y < mosaic.cells; ++y) {
    const uint32_t* row = &mosaic.colors[size_t(y) * mosaic.cells];
    for (int x = 0; x < mosaic.cells;) {
      int end = x + 1;
      while (end < mosaic.cells && row[end] == row[x]) ++end;
      draw->AddRectFilled(ImVec2(origin.x + x * cell, origin.y + y * cell),
                          ImVec2(origin.x + end * cell, origin.y + (y + 1) * cell), row[x]);
      x = end;
    }
  }
}

void reason_tooltip(const std::string& text) {
  if (text.empty() || !ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) return;
  // Wrapped, as ImGui's own help markers do: a long reason on one line ran off the window.
  ImGui::BeginTooltip();
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36.f);
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopTextWrapPos();
  ImGui::EndTooltip();
}

}  // namespace cubeforge::app
