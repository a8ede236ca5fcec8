// The settings inside the Generate panel, one collapsing section each: the
// model folder, backend and speed, sampling, shape, progressive preview. Each
// widget edits AppSettings directly; settings.json is written when the app
// closes and after each generation the history keeps.
#include <algorithm>
#include <array>
#include <filesystem>
#include <random>

#include "app/desktop/panels/panels.h"
#include "inference/pipeline/cube_model.h"

namespace cubeforge::app {

namespace {

void draw_model_section(App& app) {
  ModelState& model = app.state.model;
  const bool busy = app.worker.busy();
  ImGui::InputText("Model folder", &model.folder_field);
  if (default_model_folder().empty())
    reason_tooltip("This build has no built-in model. Point this at a Cube 3D model folder: shape_gpt.safetensors, "
                   "shape_tokenizer.safetensors, config.yaml and clip/ (the reference fixture "
                   "../shared/oracle/cube3d-v05 beside the project is a tiny valid one).");
  ImGui::BeginDisabled(busy);
  if (ImGui::Button("Load")) app.load_model(model.folder_field);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(model.loading_folder.empty());
  if (ImGui::Button("Cancel loading")) app.worker.cancel();
  ImGui::EndDisabled();
  const auto& recent_folders = app.state.settings.recent_folders;
  if (!recent_folders.empty() && ImGui::BeginCombo("Recent", "choose a recent folder")) {
    for (const auto& recent : recent_folders)
      if (ImGui::Selectable(recent.c_str())) model.folder_field = recent;
    ImGui::EndCombo();
  }
  if (!app.worker.has_model() && model.loading_folder.empty()) {
    ImGui::TextWrapped("No model loaded. This build has no built-in model: enter a Cube 3D model folder "
                       "(shape_gpt.safetensors, shape_tokenizer.safetensors, config.yaml, clip/) and press Load.");
    // The reference fixture beside the source tree is a tiny valid model
    // (random weights): enough to try every part of the app.
    const auto fixture =
        (std::filesystem::path(CUBEFORGE_SOURCE_DIR) / ".." / "shared" / "oracle" / "cube3d-v05").lexically_normal();
    if (std::filesystem::exists(fixture / "shape_gpt.safetensors")) {
      ImGui::BeginDisabled(busy);
      if (ImGui::Button("Use the test fixture model")) app.load_model(fixture.string());
      ImGui::EndDisabled();
      reason_tooltip(fixture.string() + ": a tiny model with random weights; shapes are not meaningful");
    }
  }
}

void draw_backend_section(AppSettings& settings) {
  const CudaAvailability& cuda = cuda_backend_availability();
  int backend = settings.backend == "cuda" ? 2 : settings.backend == "cpu" ? 1 : 0;
  if (!cuda.available && backend == 2) backend = 0;
  ImGui::RadioButton("Auto", &backend, 0);
  reason_tooltip(cuda.available ? "CUDA on " + cuda.device : "The CPU: " + cuda.why_not);
  ImGui::SameLine();
  ImGui::RadioButton("CPU", &backend, 1);
  ImGui::SameLine();
  ImGui::BeginDisabled(!cuda.available);
  ImGui::RadioButton("CUDA", &backend, 2);
  ImGui::EndDisabled();
  reason_tooltip(cuda.available ? cuda.device : cuda.why_not);
  settings.backend = backend == 2 ? "cuda" : backend == 1 ? "cpu" : "auto";
  ImGui::TextDisabled("%s", cuda.available ? ("GPU: " + cuda.device).c_str() : ("No GPU: " + cuda.why_not).c_str());
  ImGui::Checkbox("KV cache", &settings.kv_cache);
  ImGui::SameLine();
  const bool graphs_apply = cuda.available && backend != 1;
  ImGui::BeginDisabled(!graphs_apply);
  bool graphs = settings.cuda_graphs && graphs_apply;
  if (ImGui::Checkbox("CUDA graphs", &graphs)) settings.cuda_graphs = graphs;
  ImGui::EndDisabled();
  reason_tooltip(graphs_apply ? "Record each decode step once and replay it per token"
                              : "CUDA graphs need the CUDA backend: " + (cuda.available ? std::string("choose Auto or CUDA") : cuda.why_not));
  int attention = settings.attention == "reference" ? 1 : 0;
  ImGui::RadioButton("causal", &attention, 0);
  reason_tooltip("Correct causal attention (identical to recomputing the whole sequence)");
  ImGui::SameLine();
  ImGui::RadioButton("reference", &attention, 1);
  reason_tooltip("Reproduces the reference implementation's KV-cache decode quirk");
  settings.attention = attention == 1 ? "reference" : "causal";
}

void draw_sampling_section(AppSettings& settings) {
  ImGui::SliderFloat("Guidance", &settings.guidance, 0.f, 10.f, "%.2f");
  // Button first, then a field sized to what is left, so both fit the panel.
  if (ImGui::Button("Randomise")) settings.seed = std::random_device{}() % 1000000;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("Seed").x -
                          ImGui::GetStyle().ItemInnerSpacing.x);
  int64_t seed = static_cast<int64_t>(settings.seed);
  if (ImGui::InputScalar("Seed", ImGuiDataType_S64, &seed) && seed >= 0) settings.seed = static_cast<uint64_t>(seed);
  ImGui::Checkbox("Sample (off: greedy)", &settings.sampling);
  ImGui::BeginDisabled(!settings.sampling);
  ImGui::SliderFloat("Temperature", &settings.temperature, 0.05f, 2.f, "%.2f");
  ImGui::SliderInt("Top-k (0: off)", &settings.top_k, 0, 256);
  ImGui::SliderFloat("Top-p (1: off)", &settings.top_p, 0.05f, 1.f, "%.2f");
  ImGui::EndDisabled();
}

void draw_shape_section(AppSettings& settings) {
  ImGui::Checkbox("Bounding box", &settings.use_bbox);
  ImGui::BeginDisabled(!settings.use_bbox);
  ImGui::SliderFloat3("Size X Y Z", settings.bbox.data(), 0.1f, 2.f, "%.2f");
  struct Preset {
    const char* name;
    std::array<float, 3> size;
  };
  static const Preset presets[] = {{"Cube", {1, 1, 1}}, {"Tall", {1, 2, 1}}, {"Wide", {2, 1, 1}},
                                   {"Flat", {2, 0.5f, 2}}};
  for (const Preset& preset : presets) {
    if (ImGui::Button(preset.name)) settings.bbox = preset.size;
    ImGui::SameLine();
  }
  ImGui::NewLine();
  ImGui::EndDisabled();
  ImGui::SliderInt("Mesh resolution", &settings.resolution, 4, 9);
  reason_tooltip("Grid of (2^R + 1)^3 points; each step up costs about 8x the occupancy time");
  int faces = static_cast<int>(settings.target_faces);
  if (ImGui::InputInt("Target faces", &faces, 1000, 10000)) settings.target_faces = std::max(-1, faces);
  reason_tooltip("0: automatic (max(10000, 10% of faces)); -1: no simplification");
}

void draw_preview_section(AppSettings& settings) {
  ImGui::Checkbox("Preview while decoding", &settings.progressive_preview);
  reason_tooltip("Every k tokens the shape decoder runs at low resolution on the tokens so far. It needs all N "
                 "tokens, so the missing ones repeat the most recent token. Previews are skipped when they would "
                 "slow decoding by more than 10%.");
  ImGui::SliderInt("Every k tokens", &settings.preview_every, 1, 32);
  ImGui::SliderInt("Preview resolution", &settings.preview_resolution, 3, 5);
}

}  // namespace

void draw_settings(App& app) {
  AppSettings& settings = app.state.settings;
  if (ImGui::CollapsingHeader("Model", ImGuiTreeNodeFlags_DefaultOpen)) draw_model_section(app);
  if (ImGui::CollapsingHeader("Backend and speed", ImGuiTreeNodeFlags_DefaultOpen)) draw_backend_section(settings);
  if (ImGui::CollapsingHeader("Sampling", ImGuiTreeNodeFlags_DefaultOpen)) draw_sampling_section(settings);
  if (ImGui::CollapsingHeader("Shape")) draw_shape_section(settings);
  if (ImGui::CollapsingHeader("Progressive preview")) draw_preview_section(settings);
}

}  // namespace cubeforge::app
