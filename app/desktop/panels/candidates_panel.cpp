// The Candidates grid: several seeds of one prompt side by side in the free
// part of the view, each the engine's render of its shape, with its seed and
// size, and how they were made. A click picks one (it becomes the shape on
// screen, ready to export; the settings stay); "Use this candidate's settings" takes its
// seed and sampling into the settings, said in the log; Refine makes the
// picked one again at the requested resolution.
#include <algorithm>
#include <cstdio>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// How the candidates were made: sampled (a greedy run ignores the seed, so
// its "seed 0" is another shape than a candidate's), with which seeds.
std::string how_candidates_sample(const CandidateState& candidates) {
  const GenerationRequest& made = candidates.made_with;
  char text[200];
  if (made.sampling.greedy) return "Made greedily";
  std::string sampling = "temperature ";
  std::snprintf(text, sizeof text, "%g", made.sampling.temperature);
  sampling += text;
  if (made.sampling.top_k > 0) sampling += ", top-k " + std::to_string(made.sampling.top_k);
  std::snprintf(text, sizeof text, ", top-p %g", made.sampling.top_p);
  sampling += text;
  const unsigned long long first = made.seed, last = made.seed + std::max(0, candidates.count - 1);
  std::snprintf(text, sizeof text,
                "Sampled (%s) with seeds %llu to %llu at resolution %d, so each differs from a greedy "
                "run of the same seed.",
                sampling.c_str(), first, last, made.resolution);
  return text;
}

}  // namespace

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
  const std::string how = how_candidates_sample(candidates);
  ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + 2 * size + ImGui::GetStyle().ItemSpacing.x);
  ImGui::TextDisabled("%s", how.c_str());
  ImGui::PopTextWrapPos();
  remember_text(app, "candidates-how", how);
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
  ImGui::BeginDisabled(candidates.picked < 0);
  if (ImGui::Button("Use this candidate's settings")) app.use_candidate_settings();
  remember_item(app, "use-candidate-settings");
  ImGui::EndDisabled();
  reason_tooltip(candidates.picked < 0 ? "click a candidate to pick it first"
                                       : "Sets the seed and sampling (and the prompt) to the picked candidate's, so "
                                         "Generate makes it again; the log says what changed");
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
