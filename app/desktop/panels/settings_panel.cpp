// The settings inside the Generate panel, one collapsing section each, in the
// words of someone making shapes (the engineering terms are in the tooltips
// and the statistics): shape, variation, preview, speed, model. Each
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
  ImGui::InputText("Folder", &model.folder_field);
  if (default_model_folder().empty())
    reason_tooltip("This build has no built-in model. Point this at a Cube 3D model folder: shape_gpt.safetensors, "
                   "shape_tokenizer.safetensors, config.yaml and clip/ (the reference fixture "
                   "../shared/oracle/cube3d-v05 beside the project is a tiny valid one).");
  ImGui::BeginDisabled(busy);
  if (ImGui::Button("Load")) app.load_model(model.folder_field);
  ImGui::EndDisabled();
  flow_next(button_width("Cancel loading"));
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
    if (std::error_code ec; std::filesystem::exists(fixture / "shape_gpt.safetensors", ec)) {
      ImGui::BeginDisabled(busy);
      if (ImGui::Button("Use the test fixture model")) app.load_model(fixture.string());
      ImGui::EndDisabled();
      reason_tooltip(fixture.string() + ": a tiny model with random weights; shapes are not meaningful");
    }
  }
}

void draw_backend_section(AppSettings& settings) {
  const std::string cuda_reason = cuda_generation_unavailable_reason();
  int backend = settings.backend == "cuda" ? 1 : 0;
  if (!cuda_reason.empty()) backend = 0;
  ImGui::RadioButton("CPU", &backend, 0);
  flow_next(checkbox_width("GPU (CUDA)"));
  ImGui::BeginDisabled(!cuda_reason.empty());
  ImGui::RadioButton("GPU (CUDA)", &backend, 1);
  ImGui::EndDisabled();
  reason_tooltip(cuda_reason);
  settings.backend = backend == 1 ? "cuda" : "cpu";
  ImGui::Checkbox("Faster decoding", &settings.kv_cache);
  reason_tooltip("Reuses the work of earlier tokens (the KV cache): same shape, much less time per token");
  ImGui::BeginDisabled(!cuda_reason.empty());
  bool graphs = settings.cuda_graphs && cuda_reason.empty();
  if (ImGui::Checkbox("GPU fast path", &graphs)) settings.cuda_graphs = graphs;
  ImGui::EndDisabled();
  reason_tooltip(cuda_reason.empty() ? "CUDA graphs: the GPU replays each token's work in one launch"
                                     : "Needs the GPU (CUDA graphs): " + cuda_reason);
  int attention = settings.attention == "reference" ? 1 : 0;
  ImGui::RadioButton("Exact", &attention, 0);
  reason_tooltip("Correct causal attention: the same result as recomputing the whole sequence");
  flow_next(checkbox_width("As the reference"));
  ImGui::RadioButton("As the reference", &attention, 1);
  reason_tooltip("Reproduces the reference implementation's cached decoding exactly, quirk included");
  settings.attention = attention == 1 ? "reference" : "causal";
}

void draw_sampling_section(AppSettings& settings) {
  ImGui::SliderFloat("Guidance", &settings.guidance, 0.f, 10.f, "%.2f");
  reason_tooltip("How strongly the prompt steers the shape (3 is the model's default)");
  // Button first, then a field sized to what is left, so both fit the panel.
  if (ImGui::Button("Randomise")) settings.seed = std::random_device{}() % 1000000;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("Seed").x -
                          ImGui::GetStyle().ItemInnerSpacing.x);
  int64_t seed = static_cast<int64_t>(settings.seed);
  if (ImGui::InputScalar("Seed", ImGuiDataType_S64, &seed) && seed >= 0) settings.seed = static_cast<uint64_t>(seed);
  ImGui::Checkbox("Vary with the seed", &settings.sampling);
  reason_tooltip("On: sample each token (the seed picks one of many shapes). Off: always the most likely "
                 "token (greedy), the same shape for every seed.");
  ImGui::BeginDisabled(!settings.sampling);
  ImGui::SliderFloat("Temperature", &settings.temperature, 0.05f, 2.f, "%.2f");
  reason_tooltip("Higher: more surprising shapes");
  ImGui::SliderInt("Top-k", &settings.top_k, 0, 256, settings.top_k == 0 ? "off" : "%d");
  reason_tooltip("Sample among the k most likely tokens only (0: off)");
  ImGui::SliderFloat("Top-p", &settings.top_p, 0.05f, 1.f, settings.top_p >= 1.f ? "off" : "%.2f");
  reason_tooltip("Sample among the most likely tokens that make up this probability (1: off)");
  ImGui::EndDisabled();
}

void draw_shape_section(AppSettings& settings) {
  ImGui::SliderInt("Detail", &settings.resolution, 4, 9, "resolution %d");
  reason_tooltip("Grid of (2^R + 1)^3 points; each step up costs about 4 to 8 times the meshing time. "
                 "A coarse preview shows first either way.");
  int faces = static_cast<int>(settings.target_faces);
  if (ImGui::InputInt("Max faces", &faces, 1000, 10000)) settings.target_faces = std::max(-1, faces);
  reason_tooltip("Simplify to at most this many faces. 0: automatic (max(10000, 10% of faces)); -1: keep all");
  ImGui::Checkbox("Bounding box", &settings.use_bbox);
  ImGui::BeginDisabled(!settings.use_bbox);
  ImGui::SliderFloat3("Size", settings.bbox.data(), 0.1f, 2.f, "%.2f");
  reason_tooltip("Width, height, depth: the shape is fitted to these proportions");
  struct Preset {
    const char* name;
    std::array<float, 3> size;
  };
  static const Preset presets[] = {{"Cube", {1, 1, 1}}, {"Tall", {1, 2, 1}}, {"Wide", {2, 1, 1}},
                                   {"Flat", {2, 0.5f, 2}}};
  for (const Preset& preset : presets) {
    if (&preset != presets) flow_next(button_width(preset.name));
    if (ImGui::Button(preset.name)) settings.bbox = preset.size;
  }
  ImGui::EndDisabled();
}

void draw_preview_section(AppSettings& settings) {
  ImGui::Checkbox("Show while generating", &settings.progressive_preview);
  reason_tooltip("Every few tokens a quick low-detail mesh of the tokens so far (the missing ones repeat the "
                 "latest). Previews take at most half of the token time; the first always shows.");
  ImGui::SliderInt("Every", &settings.preview_every, 1, 32, "%d tokens");
  ImGui::SliderInt("Preview detail", &settings.preview_resolution, 3, 5, "resolution %d");
}

}  // namespace

void draw_settings(App& app) {
  AppSettings& settings = app.state.settings;
  // Room for the longest label at the right of every widget, so none is cut off.
  ImGui::PushItemWidth(-(ImGui::CalcTextSize("Preview detail").x + ImGui::GetStyle().ItemInnerSpacing.x));
  auto section = [&](const char* title, const char* name, ImGuiTreeNodeFlags flags) {
    const bool open = ImGui::CollapsingHeader(title, flags);
    remember_item(app, name);
    return open;
  };
  if (section("Shape", "section-shape", ImGuiTreeNodeFlags_DefaultOpen)) draw_shape_section(settings);
  if (section("Variation", "section-variation", ImGuiTreeNodeFlags_DefaultOpen)) draw_sampling_section(settings);
  if (section("Preview", "section-preview", 0)) draw_preview_section(settings);
  if (section("Speed", "section-speed", 0)) draw_backend_section(settings);
  // Without a model the section is where to start.
  if (!app.worker.has_model()) ImGui::SetNextItemOpen(true, ImGuiCond_Always);
  if (section("Model", "section-model", 0)) draw_model_section(app);
  ImGui::PopItemWidth();
}

}  // namespace cubeforge::app
