// The settings inside the Generate panel, one collapsing section each, in the
// words of someone making shapes (the engineering terms are in the tooltips
// and the statistics): shape, variation, preview, speed (with the smaller
// weights and KV caches), model, and last, closed, what engineers measure
// with (the latency demo, the reference's attention). Each
// widget edits AppSettings directly; settings.json is written when the app
// closes and after each generation the history keeps.
#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <random>
#include <span>

#include "app/desktop/core/detail_timing.h"
#include "app/desktop/core/option_labels.h"
#include "app/desktop/panels/panels.h"
#include "inference/pipeline/cube_model.h"

namespace cubeforge::app {

namespace {

void draw_model_section(App& app) {
  ModelState& model = app.state.model;
  const bool busy = app.worker.busy();
  ImGui::InputText("Folder", &model.folder_field);
  remember_item(app, "model-folder");
  if (default_model_folder().empty())
    reason_tooltip("This build has no built-in model. Point this at a Cube 3D model folder: shape_gpt.safetensors, "
                   "shape_tokenizer.safetensors, config.yaml and clip/ (the reference fixture "
                   "../shared/oracle/cube3d-v05 beside the project is a tiny valid one).");
  ImGui::BeginDisabled(busy);
  if (ImGui::Button("Load")) app.load_model(model.folder_field);
  ImGui::EndDisabled();
  remember_item(app, "model-load");
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
  if (const auto summary = app.worker.model_summary(); summary && summary->block_diffusion) {
    ImGui::PushTextWrapPos(0.f);
    const float setting = app.state.settings.diffusion_threshold;
    ImGui::TextDisabled("This model decodes by blocks (block diffusion): every code whose confidence passes %.2f%s "
                        "is accepted at once, several per model evaluation. It does not vary with the seed.",
                        double(summary->threshold_for(setting)), setting > 0.f ? "" : " (the model's own)");
    ImGui::PopTextWrapPos();
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

// Why the engine cannot run `changed` (these settings with one control
// moved) when it can run the settings as they are, worded for the control at
// fault; empty otherwise. Controls ask it for the value they would set, so
// what the loaded model or backend cannot honour is greyed out with the reason.
std::string refusal_of_change(const App& app, const AppSettings& changed) {
  const Status answer = app.worker.can_run(make_request(changed));
  if (answer.ok()) return "";
  const Status now = app.worker.can_run(make_request(app.state.settings));
  if (!now.ok() && now.error().message == answer.error().message) return "";
  return for_creator(answer.error());
}

// Why the GPU cannot run these settings (the CUDA backend's supports()), or empty.
std::string gpu_refuses(const App& app) {
  const Status answer = app.worker.backend_supports(BackendChoice::kCuda, make_request(app.state.settings));
  return answer.ok() ? "" : "On the CPU: " + for_creator(answer.error());
}

void draw_backend_section(App& app) {
  AppSettings& settings = app.state.settings;
  const CudaAvailability& cuda = cuda_backend_availability();
  const std::string on_cpu_only = gpu_refuses(app);
  int backend = settings.backend == "cuda" ? 2 : settings.backend == "cpu" ? 1 : 0;
  if (!cuda.available && backend == 2) backend = 0;
  ImGui::RadioButton("Auto", &backend, 0);
  reason_tooltip(!cuda.available       ? "The CPU: " + cuda.why_not
                 : on_cpu_only.empty() ? "The GPU: " + cuda.device
                                       : on_cpu_only);
  flow_next(checkbox_width("CPU"));
  ImGui::RadioButton("CPU", &backend, 1);
  flow_next(checkbox_width("GPU (CUDA)"));
  ImGui::BeginDisabled(!cuda.available || !on_cpu_only.empty());
  ImGui::RadioButton("GPU (CUDA)", &backend, 2);
  remember_item(app, "backend-gpu");
  remember_refusal(app, "backend-gpu", !cuda.available ? cuda.why_not : on_cpu_only);
  ImGui::EndDisabled();
  reason_tooltip(!cuda.available ? cuda.why_not : on_cpu_only.empty() ? cuda.device : on_cpu_only);
  settings.backend = backend == 2 ? "cuda" : backend == 1 ? "cpu" : "auto";
  ImGui::TextDisabled("%s", cuda.available ? ("GPU: " + cuda.device).c_str() : "No GPU: generating on the CPU");
  reason_tooltip(cuda.available ? "" : cuda.why_not);
  ImGui::Checkbox("Faster decoding", &settings.kv_cache);
  reason_tooltip("Reuses the work of earlier tokens (the KV cache): same shape, much less time per token");
  const bool graphs_apply = cuda.available && backend != 1;
  ImGui::BeginDisabled(!graphs_apply);
  bool graphs = settings.cuda_graphs && graphs_apply;
  if (ImGui::Checkbox("GPU fast path", &graphs)) settings.cuda_graphs = graphs;
  ImGui::EndDisabled();
  reason_tooltip(graphs_apply ? "CUDA graphs: the GPU replays each token's work in one launch"
                              : "Needs the GPU (CUDA graphs): " +
                                    (cuda.available ? std::string("choose Auto or GPU") : cuda.why_not));
}

// What engineers measure and compare with, kept out of a creator's way in a
// section of its own, closed until opened: the latency demo and the
// reference implementation's attention.
void draw_engineers_section(App& app) {
  AppSettings& settings = app.state.settings;
  const std::string why_not = app.why_not_generate();
  ImGui::BeginDisabled(!why_not.empty());
  if (ImGui::Button("Latency demo")) app.start_latency_demo();
  ImGui::EndDisabled();
  remember_item(app, "latency-demo");
  reason_tooltip(why_not.empty() ? "Runs this prompt without the KV cache, with it, and with CUDA graphs when "
                                   "available, and compares TPOT and total time"
                                 : why_not);
  ImGui::TextDisabled("Attention");
  int attention = settings.attention == "reference" ? 1 : 0;
  ImGui::RadioButton("Exact", &attention, 0);
  reason_tooltip("Correct causal attention: the same result as recomputing the whole sequence");
  flow_next(checkbox_width("As the reference"));
  AppSettings as_reference = settings;
  as_reference.attention = "reference";
  const std::string reference_refused = attention == 0 ? refusal_of_change(app, as_reference) : "";
  ImGui::BeginDisabled(!reference_refused.empty());
  ImGui::RadioButton("As the reference", &attention, 1);
  remember_item(app, "attention-reference");
  remember_refusal(app, "attention-reference", reference_refused);
  ImGui::EndDisabled();
  reason_tooltip(reference_refused.empty()
                     ? "Reproduces the reference implementation's cached decoding exactly, quirk included"
                     : reference_refused);
  settings.attention = attention == 1 ? "reference" : "causal";
}

// One choice of a combo: its name, and what it costs.
struct Choice {
  const char* name;
  const char* label;
  const char* cost;
};

// A combo over `choices` editing `value`; `refused` names the choices that
// cannot be taken now (with the engine's reason). The combo is a named item
// (`NAME`), and so is each choice (`NAME-CHOICE`), for scripts.
void choice_combo(App& app, const char* label, const char* name, std::string& value,
                  std::span<const Choice> choices, const std::function<std::string(const Choice&)>& refused) {
  const Choice* current = &choices[0];
  for (const Choice& choice : choices)
    if (value == choice.name) current = &choice;
  remember_text(app, name, current->label);
  if (!ImGui::BeginCombo(label, current->label)) {
    remember_item(app, name);  // while open, the last item is in the popup: the closed combo's place stays
    return;
  }
  for (const Choice& choice : choices) {
    const std::string why_not = refused ? refused(choice) : "";
    if (ImGui::Selectable(choice.label, &choice == current, why_not.empty() ? 0 : ImGuiSelectableFlags_Disabled))
      value = choice.name;
    remember_item(app, std::string(name) + "-" + choice.name);
    remember_text(app, std::string(name) + "-" + choice.name, choice.label);
    remember_text(app, std::string(name) + "-" + choice.name + "-help", choice.cost);
    remember_refusal(app, std::string(name) + "-" + choice.name, why_not);
    reason_tooltip(why_not.empty() ? choice.cost : why_not);
  }
  ImGui::EndCombo();
}

// What each choice does for the person, as measured on the built-in model
// (docs/performance.md, "Smaller weights and KV caches": time per token
// against the exact setting, the share of greedy tokens unchanged, and the
// mesh's overlap with the exact one); the technical name in the tooltip.
const Choice kWeightChoices[] = {
    {"stored", "Exact", "stored: the matrices as the model file holds them, exact against the reference"},
    {"bf16", "Half the memory, same shapes",
     "bf16 (float32 rounded to bfloat16): half the memory; decoding 1.2x to 1.5x as fast; 99.7% of tokens and of the "
     "shape's volume as with the exact weights"},
    {"q8", "Quarter memory, shapes differ a little",
     "q8 (8-bit integers, a scale per 32 weights): a quarter of the memory; decoding 1.2x to 1.7x as fast; 88% of "
     "tokens unchanged, shapes overlap the exact ones by 90%"},
    {"q4", "Eighth memory, shapes differ a lot",
     "q4 (4-bit integers, a scale and offset per 32 weights): an eighth of the memory; decoding 1.3x to 1.6x as fast; "
     "55% of tokens unchanged, shapes overlap the exact ones by 64%"},
};
const Choice kKvChoices[] = {
    {"f32", "Exact", "f32: float32 keys and values, exact"},
    {"bf16", "Half the memory, nearly the same shapes",
     "bf16 keys and values: half the cache's memory; decoding about 1.2x as fast; 94% of tokens unchanged, shapes "
     "overlap the exact ones by 97%"},
    {"fp8", "Quarter memory, shapes differ a lot",
     "fp8 (8-bit floats): a quarter of the cache's memory; decoding up to 1.3x as fast; 62% of tokens unchanged, "
     "shapes overlap the exact ones by 70%"},
    {"int8", "Quarter memory, nearly the same shapes",
     "int8 (KIVI: 8-bit integers, keys per channel over blocks of 32 positions): about a quarter of the cache's "
     "memory; decoding 1.1x to 1.35x as fast; 96% of tokens unchanged, shapes overlap the exact ones by 98%"},
};

// The engine's --weights, --kv-cache, --kv-budget and --kv-rank. The
// defaults are exact; each other choice trades a little accuracy for memory
// read per token. Choices the engine cannot combine are disabled with its reason.
void draw_smaller_section(App& app) {
  AppSettings& settings = app.state.settings;
  const auto summary = app.worker.model_summary();
  ImGui::PushTextWrapPos(0.f);
  ImGui::TextDisabled("Less memory, faster tokens, less exact shapes (the defaults are exact)");
  ImGui::PopTextWrapPos();

  const bool busy = app.worker.busy();
  ImGui::BeginDisabled(busy);
  choice_combo(app, control_for(OptionKey::kWeights), "weights", settings.weights, kWeightChoices, {});
  ImGui::EndDisabled();
  reason_tooltip(busy ? "Wait for the current job: changing the weights reloads the model"
                      : "The weights' format: how the model's matrices are held, fewer bytes read per token. "
                        "Changing it reloads the model, converting them as it loads; both backends read them in "
                        "that form.");

  // Without the cache there is nothing to store; otherwise the engine says
  // what a smaller cache cannot run with (the reference's attention quirk).
  AppSettings smaller = settings;
  smaller.kv_cache_format = settings.kv_cache_format == "bf16" ? "fp8" : "bf16";
  const std::string cache_refused =
      !settings.kv_cache ? "Needs Faster decoding (the KV cache): without it there is no cache to make smaller"
                         : refusal_of_change(app, smaller);
  ImGui::BeginDisabled(!cache_refused.empty());
  choice_combo(app, control_for(OptionKey::kKvFormat), "kv-cache-format", settings.kv_cache_format, kKvChoices,
               [&](const Choice& choice) -> std::string {
                 AppSettings chosen = settings;
                 chosen.kv_cache_format = choice.name;
                 return refusal_of_change(app, chosen);
               });
  ImGui::EndDisabled();
  reason_tooltip(!cache_refused.empty() ? cache_refused
                                        : "The KV cache's format: how the keys and values of earlier tokens are "
                                          "stored; fewer bytes read per token");

  AppSettings with_budget = settings;
  with_budget.kv_budget = 2;
  const std::string budget_refused = settings.kv_budget == 0 ? refusal_of_change(app, with_budget) : "";
  const int positions = summary ? summary->shape_tokens : 1024;
  ImGui::BeginDisabled(!cache_refused.empty() || !budget_refused.empty());
  int budget = settings.kv_budget;
  if (ImGui::SliderInt(control_for(OptionKey::kKvBudget), &budget, 0, std::max(positions, settings.kv_budget),
                       budget == 0 ? "off (exact)" : "%d steps, less exact", ImGuiSliderFlags_AlwaysClamp)) {
    // One slot holds only the first token: the engine needs 2 or none.
    if (budget == 1) budget = settings.kv_budget > 1 ? 0 : 2;
    settings.kv_budget = budget;
  }
  remember_item(app, "kv-budget");
  remember_refusal(app, "kv-budget", !cache_refused.empty() ? cache_refused : budget_refused);
  ImGui::EndDisabled();
  reason_tooltip(!cache_refused.empty() ? cache_refused
                 : !budget_refused.empty()
                     ? budget_refused
                     : "KV budget (H2O): the cache keeps at most this many shape positions per layer, the newest "
                       "half, then those attention used most; the prompt and the first token always stay. 0: "
                       "every position (exact). On the built-in model (64 tokens) 48 kept 93% of tokens "
                       "unchanged and 32 kept 76%, for tokens about 7% faster.");

  const int bases_rank = summary ? summary->kv_bases_rank : 0;
  ImGui::BeginDisabled(!cache_refused.empty() || (bases_rank == 0 && settings.kv_rank == 0));
  int rank = settings.kv_rank;
  if (ImGui::SliderInt(control_for(OptionKey::kKvRank), &rank, 0, std::max(bases_rank, settings.kv_rank),
                       rank == 0 ? "off (exact)" : "to %d, less exact", ImGuiSliderFlags_AlwaysClamp))
    settings.kv_rank = rank;
  remember_item(app, "kv-rank");
  ImGui::EndDisabled();
  std::string rank_help;
  if (!cache_refused.empty()) rank_help = cache_refused;
  else if (bases_rank > 0)
    rank_help = "KV rank: keys and values projected onto the first R vectors of this model's calibrated bases " +
                ("(up to " + std::to_string(bases_rank) + "): ") +
                "less memory per token; tokens may differ. 0: full rank (exact). On the built-in model every rank "
                "below full changed the shapes (rank 96 of 128: 54% of tokens unchanged) and was no faster over its "
                "64 tokens.";
  else
    rank_help = std::string(summary && !summary->kv_bases_problem.empty()
                                ? "This model folder's kv_bases.safetensors cannot be used (" +
                                      summary->kv_bases_problem + "). "
                                : "Needs calibrated bases in the model folder (kv_bases.safetensors). ") +
                "Write them with `cubeforge-lab calibrate-kv --model DIR --prompts FILE`, then load the model "
                "again.";
  reason_tooltip(rank_help);
}

void draw_sampling_section(App& app) {
  AppSettings& settings = app.state.settings;
  // Left to the model, the slider shows the scale the model runs at; moving it is a choice.
  const auto summary = app.worker.model_summary();
  const bool models_own = settings.guidance == kModelGuidance;
  float shown = summary ? summary->guidance_for(settings.guidance) : models_own ? kReferenceGuidance : settings.guidance;
  // The button back to the model's comes first on the line, greyed out until
  // the slider moves, and the slider takes what is left, as Randomise and
  // Seed below: nothing moves under a dragging mouse.
  const std::string back_refused = models_own ? "Guidance is already the model's own" : "";
  ImGui::BeginDisabled(models_own);
  if (ImGui::SmallButton("Model's")) settings.guidance = kModelGuidance;
  ImGui::EndDisabled();
  remember_item(app, "guidance-models");
  remember_refusal(app, "guidance-models", back_refused);
  reason_tooltip(models_own ? back_refused : "Back to the scale the model names for itself");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("Guidance").x -
                          ImGui::GetStyle().ItemInnerSpacing.x);
  if (ImGui::SliderFloat("Guidance", &shown, 0.f, 10.f, models_own ? "%.2f, the model's" : "%.2f"))
    settings.guidance = shown;
  remember_item(app, "guidance");
  reason_tooltip("How strongly the prompt steers the shape; 0 turns guidance off. Until moved it is the model's "
                 "own (its config.yaml's guidance_scale, else 3, the reference's)");
  // Button first, then a field sized to what is left, so both fit the panel.
  if (ImGui::Button("Randomise")) settings.seed = std::random_device{}() % 1000000;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("Seed").x -
                          ImGui::GetStyle().ItemInnerSpacing.x);
  int64_t seed = static_cast<int64_t>(settings.seed);
  if (ImGui::InputScalar("Seed", ImGuiDataType_S64, &seed) && seed >= 0) settings.seed = static_cast<uint64_t>(seed);
  AppSettings sampled = settings;
  sampled.sampling = true;
  const std::string sampling_refused = settings.sampling ? "" : refusal_of_change(app, sampled);
  ImGui::BeginDisabled(!sampling_refused.empty());
  ImGui::Checkbox("Vary with the seed", &settings.sampling);
  remember_item(app, "vary-with-seed");
  remember_refusal(app, "vary-with-seed", sampling_refused);
  ImGui::EndDisabled();
  reason_tooltip(!sampling_refused.empty()
                     ? sampling_refused
                     : "On: sample each token (the seed picks one of many shapes). Off: always the most likely "
                       "token (greedy), the same shape for every seed.");
  if (settings.sampling) {
    // Turned on before a model that cannot sample was loaded: say so where it is turned off.
    const Status now = app.worker.can_run(make_request(settings));
    if (!now.ok() && error_option(now.error()) == OptionKey::kSampling) {
      ImGui::PushTextWrapPos(0.f);
      ImGui::TextColored(ImVec4(1.f, 0.7f, 0.3f, 1.f), "%s", for_creator(now.error()).c_str());
      ImGui::PopTextWrapPos();
    }
  }
  ImGui::BeginDisabled(!settings.sampling);
  ImGui::SliderFloat("Temperature", &settings.temperature, 0.05f, 2.f, "%.2f");
  reason_tooltip("Higher: more surprising shapes");
  ImGui::SliderInt("Top-k", &settings.top_k, 0, 256, settings.top_k == 0 ? "off" : "%d");
  reason_tooltip("Sample among the k most likely tokens only (0: off)");
  ImGui::SliderFloat("Top-p", &settings.top_p, 0.05f, 1.f, settings.top_p >= 1.f ? "off" : "%.2f");
  reason_tooltip("Sample among the most likely tokens that make up this probability (1: off)");
  ImGui::EndDisabled();
}

// The bounding box is a condition the model was trained with (each training
// shape's own proportions, X width, Y height, Z depth), not a fit: it asks
// for proportions, both ways, and some prompts ignore it (measured on the
// built-in model: docs/builtin-model.md, "The bounding box").
constexpr const char* kBoundingBoxHelp =
    "Width, height, depth (Y is up): proportions asked of the model, a hint it was trained with, not a fit. The "
    "shape usually takes the box's longest side as its own, with proportions of its own; some prompts ignore the "
    "box. A box pulls both ways: Tall (1:2:1) makes a shape more than twice as high as wide squatter.";

void draw_shape_section(App& app) {
  AppSettings& settings = app.state.settings;
  if (ImGui::SliderInt("Detail", &settings.resolution, 4, 9, "%d")) settings.resolution_chosen = true;
  remember_item(app, "detail");
  reason_tooltip(
      "Finer detail shows smaller features and takes longer: each step up takes about 2 to 5 times as "
      "long. A coarse preview shows first either way. Technically: the meshing resolution R, a grid of "
      "(2^R + 1)^3 points.");
  // What the chosen detail costs on this machine, before it starts.
  if (settings.detail_calibration_ms > 0) {
    const double expected_ms = expected_generation_ms(settings.detail_calibration_ms, settings.resolution);
    const std::string expected = expected_time_text(expected_ms) + " per shape on this machine";
    if (expected_ms > 2 * kDefaultDetailAnswerMs)
      ImGui::TextColored(ImVec4(0.95f, 0.8f, 0.4f, 1.f), "%s", expected.c_str());
    else
      ImGui::TextDisabled("%s", expected.c_str());
    remember_text(app, "detail-expected", expected);
    reason_tooltip("From one generation timed on this machine at its first launch; detail " +
                   std::to_string(default_detail(settings.detail_calibration_ms)) + " answers in about a second.");
  }
  int faces = static_cast<int>(settings.target_faces);
  if (ImGui::InputInt("Max faces", &faces, 1000, 10000)) settings.target_faces = std::max(-1, faces);
  reason_tooltip("Simplify to at most this many faces. 0: automatic (max(10000, 10% of faces)); -1: keep all");
  ImGui::Checkbox("Bounding box", &settings.use_bbox);
  remember_item(app, "use-bbox");
  ImGui::BeginDisabled(!settings.use_bbox);
  ImGui::SliderFloat3("Size", settings.bbox.data(), 0.1f, 2.f, "%.2f");
  reason_tooltip(kBoundingBoxHelp);
  remember_text(app, "bbox-help", kBoundingBoxHelp);
  struct Preset {
    const char* name;
    const char* id;
    std::array<float, 3> size;
    const char* help;
  };
  static const Preset presets[] = {
      {"Cube", "bbox-cube", {1, 1, 1}, "As high as wide and deep (1:1:1)"},
      {"Tall", "bbox-tall", {1, 2, 1},
       "About twice as high as wide (1:2:1): a shape already taller than that comes out squatter"},
      {"Wide", "bbox-wide", {2, 1, 1}, "About twice as wide as high and deep (2:1:1)"},
      {"Flat", "bbox-flat", {2, 0.5f, 2}, "Four times as wide and deep as high (2:0.5:2)"}};
  for (const Preset& preset : presets) {
    if (&preset != presets) flow_next(button_width(preset.name));
    if (ImGui::Button(preset.name)) settings.bbox = preset.size;
    remember_item(app, preset.id);
    reason_tooltip(preset.help);
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

// Scrolls the panel so that what spans screen heights [top, bottom) shows:
// its bottom at the panel's, or its top where it is taller than the panel.
void scroll_into_view(float top, float bottom) {
  const float window_top = ImGui::GetWindowPos().y, height = ImGui::GetWindowHeight();
  if (bottom <= window_top + height) return;
  if (bottom - top <= height) ImGui::SetScrollFromPosY(bottom - window_top, 1.f);
  else ImGui::SetScrollFromPosY(top - window_top, 0.f);
}

}  // namespace

void draw_settings(App& app) {
  AppSettings& settings = app.state.settings;
  // Room for the longest label at the right of every widget, so none is cut off.
  ImGui::PushItemWidth(-(ImGui::CalcTextSize("Cache compression").x + ImGui::GetStyle().ItemInnerSpacing.x));
  // A section opened by a click scrolls into view: the last ones would
  // otherwise open below the panel's edge.
  auto section = [&](const char* title, const char* name, ImGuiTreeNodeFlags flags, auto&& contents) {
    const bool open = ImGui::CollapsingHeader(title, flags);
    remember_item(app, name);
    if (!open) return;
    const bool opened_now = ImGui::IsItemToggledOpen();
    const float top = ImGui::GetItemRectMin().y;
    contents();
    if (opened_now) scroll_into_view(top, ImGui::GetCursorScreenPos().y);
  };
  section("Shape", "section-shape", ImGuiTreeNodeFlags_DefaultOpen, [&] { draw_shape_section(app); });
  section("Variation", "section-variation", ImGuiTreeNodeFlags_DefaultOpen, [&] { draw_sampling_section(app); });
  section("Preview", "section-preview", 0, [&] { draw_preview_section(settings); });
  section("Speed", "section-speed", 0, [&] {
    draw_backend_section(app);
    draw_smaller_section(app);
  });
  // Without a model the section is where to start.
  if (!app.worker.has_model()) ImGui::SetNextItemOpen(true, ImGuiCond_Always);
  section("Model", "section-model", 0, [&] { draw_model_section(app); });
  section("For engineers", "section-engineers", 0, [&] { draw_engineers_section(app); });
  ImGui::PopItemWidth();
}

}  // namespace cubeforge::app
