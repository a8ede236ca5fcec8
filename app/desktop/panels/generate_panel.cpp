// The Generate panel: the prompt, Generate / Cancel / Latency demo, the model
// load's progress or outcome, then the settings (settings_panel.cpp).
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// The run in words and one bar that only moves forward: which pass, about how
// long is left, what the view shows meanwhile; how the last run ended.
void draw_run_status(App& app) {
  GenerationState& generation = app.state.generation;
  GenerationProgress& progress = generation.progress;
  if (!generation.generating && progress.outcome() == RunOutcome::kRunning) return;  // nothing run yet
  const double elapsed_ms = ms_between(generation.run_started, Clock::now());
  const std::string status = progress.status(elapsed_ms);
  if (progress.outcome() == RunOutcome::kFailed) ImGui::TextColored(kErrorTextColour, "%s", status.c_str());
  else ImGui::TextWrapped("%s", status.c_str());
  ImGui::ProgressBar(progress.fraction(elapsed_ms), ImVec2(-1, 0));
  remember_item(app, "run-progress");
  if (!generation.preview_shown.empty()) ImGui::TextDisabled("Showing the %s", generation.preview_shown.c_str());
}

}  // namespace

void draw_generate_panel(App& app) {
  AppState& state = app.state;
  begin_panel(app, Panel::kGenerate);
  const bool busy = app.worker.busy();
  ImGui::TextUnformatted("Prompt (Ctrl+Enter generates)");
  if (ImGui::InputTextMultiline("##prompt", &state.settings.prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 4),
                                ImGuiInputTextFlags_EnterReturnsTrue) &&
      !busy)
    app.start_generation();
  remember_item(app, "prompt");
  ImGui::BeginDisabled(busy || !app.worker.has_model());
  if (ImGui::Button("Generate")) app.start_generation();
  remember_item(app, "generate");
  ImGui::EndDisabled();
  if (!app.worker.has_model()) reason_tooltip("load a model first (Settings > Model folder)");
  flow_next(button_width("Cancel"));
  ImGui::BeginDisabled(!busy);
  if (ImGui::Button("Cancel")) app.worker.cancel();
  remember_item(app, "cancel");
  ImGui::EndDisabled();
  flow_next(button_width("Latency demo"));
  ImGui::BeginDisabled(busy || !app.worker.has_model());
  if (ImGui::Button("Latency demo")) app.start_latency_demo();
  ImGui::EndDisabled();
  reason_tooltip("Runs this prompt without the KV cache, with it, and with CUDA graphs when available, "
                 "and compares TPOT and total time");

  draw_run_status(app);

  const ModelState& model = state.model;
  if (!model.loading_folder.empty()) {
    ImGui::TextWrapped("Loading %s", model.loading_folder.c_str());
    ImGui::ProgressBar(static_cast<float>(model.load_fraction), ImVec2(-1, 0), model.load_step.c_str());
  } else if (!model.status.empty()) {
    ImGui::TextWrapped("%s", model.status.c_str());
  }
  ImGui::Separator();
  draw_settings(app);
  ImGui::End();
}

}  // namespace cubeforge::app
