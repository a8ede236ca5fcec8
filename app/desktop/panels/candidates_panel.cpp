// The Candidates grid: several seeds of one prompt side by side in the free
// part of the view, each the engine's render of its shape, with its seed and
// size. A click picks one (it becomes the shape on screen, ready to export);
// Refine makes the picked one again at the requested resolution.
#include <algorithm>
#include <cstdio>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

void draw_candidates_panel(App& app) {
  CandidateState& candidates = app.state.candidates;
  if (!candidates.shown) return;
  const Rect& free = app.state.layout.layout.free_view;
  const float size = std::clamp(std::min(free.width, free.height) * 0.22f, 80.f, 160.f);
  const ImGuiCond when = app.state.layout.place_panels ? ImGuiCond_Always : ImGuiCond_Appearing;
  ImGui::SetNextWindowPos(ImVec2(free.x + 8, free.y + 8), when);
  bool open = true;
  ImGui::Begin("Candidates", &open, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings);
  ImGui::Text("\"%s\": %d of %d", candidates.prompt.c_str(), static_cast<int>(candidates.items.size()),
              candidates.count);
  for (int i = 0; i < candidates.count; ++i) {
    if (i % 2 == 1) ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::PushID(i);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const bool ready = i < static_cast<int>(candidates.items.size());
    if (ImGui::InvisibleButton("pick", ImVec2(size, size)) && ready && !app.worker.busy()) app.pick_candidate(i);
    remember_item(app, "candidate-" + std::to_string(i));
    ImDrawList* draw = ImGui::GetWindowDrawList();
    if (ready) {
      draw_mosaic(candidates.items[size_t(i)].thumbnail, origin, size);
      if (candidates.picked == i || ImGui::IsItemHovered())
        draw->AddRect(origin, ImVec2(origin.x + size, origin.y + size),
                      candidates.picked == i ? IM_COL32(255, 200, 60, 255) : IM_COL32(200, 200, 200, 160), 0.f, 0,
                      candidates.picked == i ? 3.f : 1.f);
      const Candidate& c = candidates.items[size_t(i)];
      ImGui::Text("seed %llu, %.1fk faces", static_cast<unsigned long long>(c.request.seed), c.mesh.face_count() / 1000.0);
    } else {
      draw->AddRectFilled(origin, ImVec2(origin.x + size, origin.y + size), IM_COL32(40, 42, 48, 200));
      ImGui::TextDisabled(candidates.running ? "making..." : "not made");
    }
    ImGui::PopID();
    ImGui::EndGroup();
  }
  ImGui::BeginDisabled(candidates.picked < 0 || app.worker.busy());
  char refine[64];
  std::snprintf(refine, sizeof refine, "Refine at resolution %d", app.state.settings.resolution);
  if (ImGui::Button(refine)) app.refine_candidate();
  remember_item(app, "refine-candidate");
  ImGui::EndDisabled();
  reason_tooltip(candidates.picked < 0 ? "click a candidate to pick it first"
                                       : "The same tokens (seed and sampling) meshed at the requested detail");
  ImGui::SameLine();
  if (ImGui::Button("Close")) open = false;
  ImGui::End();
  if (!open) candidates.shown = false;
}

}  // namespace cubeforge::app
