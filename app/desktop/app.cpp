// The app's actions: what a button, a script line or a key press asks for.
// See app.h.
#include "app/desktop/app.h"

#include <cstdio>

#include "app/desktop/core/app_settings.h"
#include "app/desktop/core/detail_timing.h"
#include "engine/image_output.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/geometry/mesh_io.h"
#include "inference/pipeline/cube_model.h"

namespace cubeforge::app {

void App::load_model(const std::string& folder) {
  ModelState& model = state.model;
  if (folder.empty()) {
    model.status = "No model folder. Point 'Model folder' at a Cube 3D model folder. ";
    model.status += kModelFolderHelp;
    return;
  }
  const std::string& weights = state.settings.weights;
  if (!worker.load_model(folder, WeightOptions{weight_format_from_name(weights).value_or(WeightFormat::kStored)})) {
    log_error("cannot load a model while a generation or another load runs; cancel it first");
    return;
  }
  model.loading_folder = folder;
  model.loading_weights = weights;
  model.folder_field = folder;
  model.load_step = "starting";
  model.load_fraction = 0;
  log("loading model " + folder + (weights == "stored" ? "" : " with " + weights + " weights"));
}

void App::keep_model_in_chosen_weights() {
  if (worker.busy() || !state.model.loading_folder.empty()) return;
  const auto summary = worker.model_summary();
  if (!summary || weight_format_name(summary->weights) == state.settings.weights) return;
  log("the weights changed to " + state.settings.weights + ": reloading the model");
  load_model(summary->folder);
}

std::string App::why_not_generate() const {
  if (!worker.has_model()) return "load a model first (Settings > Model folder)";
  if (prompt_is_blank(state.settings.prompt))
    return "type what to make first: without a prompt the model makes a long run of nothing in particular";
  if (worker.busy()) return "a job is running; wait for it or cancel it";
  return "";
}

GenerationRequest App::request_from_settings() const {
  GenerationRequest request = make_request(state.settings);
  request.prompt = prompt_for_request(request.prompt);
  return request;
}

void App::start_generation() {
  // The whole prompt, last word included, is judged from now on.
  state.generation.generated_prompt = state.settings.prompt;
  start_generation_of(request_from_settings());
}

bool App::start_generation_of(const GenerationRequest& request) {
  if (!worker.has_model()) {
    log_error("no model loaded: choose a model folder in Settings first");
    return false;
  }
  if (request.prompt.empty()) {
    log_error("no prompt: type what to make first");
    return false;
  }
  const AppSettings& settings = state.settings;
  PreviewOptions preview;
  preview.enabled = settings.progressive_preview;
  preview.every_tokens = settings.preview_every;
  preview.resolution = settings.preview_resolution;
  if (!worker.generate(request, preview)) {
    log_error("a job is already running; wait for it or cancel it");
    return false;
  }
  state.generation.generating = true;
  state.frames.while_generating_ms.clear();
  state.generation.preview_uploads = 0;
  state.generation.offered_preview.reset();  // this run's previews replace it
  state.generation.first_mesh_ms.reset();
  state.generation.requested = Clock::now();
  log("generating \"" + request.prompt + "\" (seed " + std::to_string(request.seed) + ", resolution " +
      std::to_string(request.resolution) + ")");
  return true;
}

void App::start_latency_demo() {
  if (!worker.has_model()) {
    log_error("no model loaded: choose a model folder in Settings first");
    return;
  }
  LatencyDemoChoice choice;
  choice.parallel = parse_decoding_mode(state.settings.latency_decoding).value_or(DecodingMode::kJacobi);
  choice.diffusion_threshold = state.settings.diffusion_threshold;
  const auto summary = worker.model_summary();
  choice.block_diffusion_model = summary && summary->block_diffusion;
  // Block diffusion beside ordinary decoding: the built-in autoregressive model, on the same prompt.
  if (choice.block_diffusion_model) choice.autoregressive_model = default_model_folder().string();
  const AppSettings& settings = state.settings;
  choice.kv_cache = kv_cache_label(settings.kv_cache_format, settings.kv_budget, settings.kv_rank);
  std::vector<LatencyRun> runs = latency_demo_runs(choice);
  // The demo runs with and without the cache whatever the settings say, and
  // with the KV cache options chosen beside the exact cache.
  GenerationRequest request = request_from_settings();
  request.kv_cache = chosen_kv_options(settings);
  if (request.prompt.empty()) {
    log_error("no prompt: type what to make first");
    return;
  }
  if (!worker.run_latency_demo(request, runs)) {
    log_error("a job is already running; wait for it or cancel it");
    return;
  }
  state.latency = LatencyDemoState{};
  state.latency.runs = std::move(runs);
  state.latency.measured.resize(state.latency.runs.size());
  state.latency.not_run.resize(state.latency.runs.size());
  state.latency.running = state.latency.shown = true;
  state.generation.generating = true;
  state.frames.while_generating_ms.clear();
  log("latency demo: the same prompt without the KV cache, with it, and with what else this build has, " +
      std::to_string(state.latency.repeats) + " times each");
}

bool App::calibrate_detail() {
  GenerationRequest request = make_request(state.settings);
  // A prompt every model answers with a shape, greedy, so the timing does not
  // hang on what the person typed or their seed.
  request.prompt = "a chair";
  request.sampling.greedy = true;
  request.resolution = kDetailCalibrationResolution;
  if (!worker.measure_detail_cost(request)) return false;
  state.detail_calibration_due = false;
  log("timing one generation at resolution " + std::to_string(kDetailCalibrationResolution) +
      " to pick the detail that answers in about a second on this machine");
  return true;
}

void App::calibrate_detail_when_due() {
  if (state.detail_calibration_due && !worker.busy() && worker.has_model()) calibrate_detail();
}

void App::start_candidates(int count) {
  if (!worker.has_model()) {
    log_error("no model loaded: choose a model folder in Settings first");
    return;
  }
  GenerationRequest request = request_from_settings();
  if (request.prompt.empty()) {
    log_error("no prompt: type what to make first");
    return;
  }
  if (!worker.generate_candidates(request, count)) {
    log_error("a job is already running; wait for it or cancel it");
    return;
  }
  CandidateState& candidates = state.candidates;
  candidates = CandidateState{};
  candidates.running = candidates.shown = true;
  candidates.count = count;
  candidates.prompt = request.prompt;
  candidates.made_with = candidate_request(request, 0);
  state.generation.generating = true;
  state.frames.while_generating_ms.clear();
  log("trying " + std::to_string(count) + " seeds of \"" + request.prompt + "\" from seed " +
      std::to_string(request.seed) + " at resolution " + std::to_string(candidate_request(request, 0).resolution));
}

void App::pick_candidate(int index) {
  CandidateState& candidates = state.candidates;
  if (index < 0 || index >= static_cast<int>(candidates.items.size())) return;
  // Only shown: the settings change when the person asks (use_candidate_settings).
  candidates.picked = index;
  const Candidate& picked = candidates.items[size_t(index)];
  take_current(picked.mesh, picked.request.prompt, picked.request.seed, true);
  log("picked seed " + std::to_string(picked.request.seed) + " (" + std::to_string(picked.mesh.face_count()) +
      " faces)");
}

namespace {

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

void App::use_candidate_settings() {
  const CandidateState& candidates = state.candidates;
  if (candidates.picked < 0 || candidates.picked >= static_cast<int>(candidates.items.size())) return;
  const GenerationRequest& made = candidates.items[size_t(candidates.picked)].request;
  AppSettings& settings = state.settings;
  // Each change said in the log, from what it was to what it is now.
  std::vector<std::string> changes;
  auto change = [&](const std::string& name, const std::string& from, const std::string& to) {
    if (from != to) changes.push_back(name + " " + from + " -> " + to);
  };
  auto on_off = [](bool on) { return std::string(on ? "on" : "off"); };
  const bool sampling = !made.sampling.greedy;
  change("prompt", "\"" + settings.prompt + "\"", "\"" + made.prompt + "\"");
  change("seed", std::to_string(settings.seed), std::to_string(made.seed));
  change("vary with the seed", on_off(settings.sampling), on_off(sampling));
  change("temperature", number_text(settings.temperature), number_text(made.sampling.temperature));
  change("top-k", std::to_string(settings.top_k), std::to_string(made.sampling.top_k));
  change("top-p", number_text(settings.top_p), number_text(made.sampling.top_p));
  settings.prompt = made.prompt;
  settings.seed = made.seed;
  settings.sampling = sampling;
  settings.temperature = made.sampling.temperature;
  settings.top_k = made.sampling.top_k;
  settings.top_p = made.sampling.top_p;
  std::string line = "settings of the candidate with seed " + std::to_string(made.seed) + ": ";
  if (changes.empty()) line += "nothing to change";
  for (size_t i = 0; i < changes.size(); ++i) line += (i ? ", " : "") + changes[i];
  log(line);
}

void App::refine_candidate() {
  const CandidateState& candidates = state.candidates;
  if (candidates.picked < 0 || candidates.picked >= static_cast<int>(candidates.items.size())) return;
  // The picked candidate's tokens (prompt, seed, sampling) at the settings' detail.
  const GenerationRequest& made = candidates.items[size_t(candidates.picked)].request;
  GenerationRequest request = request_from_settings();
  request.prompt = made.prompt;
  request.seed = made.seed;
  request.sampling = made.sampling;
  if (start_generation_of(request)) state.candidates.shown = false;
}

Result<ThumbnailMosaic> App::render_thumbnail(int cells) {
  engine::Renderer& renderer = *viewport.renderer;
  if (!viewport.thumbnails) {
    CUBEFORGE_ASSIGN_OR_RETURN(viewport.thumbnails,
                               engine::OffscreenTarget::create(renderer, engine::OffscreenOptions{160, 160}));
  }
  engine::OrbitCamera view;
  view.yaw_degrees = 30.f;
  view.pitch_degrees = 20.f;
  view.frame(renderer.mesh_bounds(), 1.f, 1.05f);
  engine::SceneSettings scene = state.view.scene;
  scene.grid = false;
  scene.wireframe = false;
  CUBEFORGE_ASSIGN_OR_RETURN(engine::RenderedImage image, viewport.thumbnails->render_and_read(view, scene));
  return mosaic_from_pixels(image.rgba.data(), int(image.width), int(image.height), cells);
}

Status App::export_current(const std::string& path) {
  if (state.current.mesh.empty())
    return make_error(ErrorCode::kInvalidArgument, "nothing to export yet: generate a shape or pick one from History");
  apply_loose_pieces_setting();  // a script's `set` may have changed it since the last frame
  return export_mesh(current_mesh_shown(), path);
}

Status App::screenshot(const std::string& path) {
  VkExtent2D extent = viewport.target->extent();
  if (extent.width == 0 || extent.height == 0) extent = {640, 480};
  auto& capture = viewport.capture;
  if (!capture) {
    engine::OffscreenOptions offscreen;
    offscreen.width = extent.width;
    offscreen.height = extent.height;
    CUBEFORGE_ASSIGN_OR_RETURN(capture, engine::OffscreenTarget::create(*viewport.renderer, offscreen));
  } else if (capture->extent().width != extent.width || capture->extent().height != extent.height) {
    CUBEFORGE_TRY(capture->resize(extent.width, extent.height));
  }
  return engine::save_screenshot(*capture, state.view.camera, state.view.scene, path);
}

void App::show_mesh(const Mesh& mesh, bool frame_camera) {
  Status uploaded = viewport.renderer->meshes().upload(mesh);
  if (!uploaded.ok()) {
    log_error("viewport upload: " + uploaded.error().to_string());
    return;
  }
  state.view.shown_faces = mesh.face_count();
  if (frame_camera && !mesh.empty()) {
    VkExtent2D extent = viewport.target->extent();
    float aspect = extent.height > 0 ? float(extent.width) / float(extent.height) : 1.f;
    state.view.camera.frame(viewport.renderer->mesh_bounds(), aspect);
  }
}

void App::take_current(Mesh mesh, const std::string& prompt, uint64_t seed, bool frame_camera) {
  CurrentShape& current = state.current;
  current = CurrentShape{};
  current.mesh = std::move(mesh);
  current.prompt = prompt;
  current.seed = seed;
  current.pieces = find_pieces(current.mesh);
  state.generation.offered_preview.reset();
  follow_loose_pieces_setting();
  show_current(frame_camera);
}

bool App::follow_loose_pieces_setting() {
  CurrentShape& current = state.current;
  const AppSettings& settings = state.settings;
  const std::optional<float> wanted =
      settings.remove_loose_pieces ? std::optional<float>(settings.loose_piece_fraction) : std::nullopt;
  if (wanted == current.loose_fraction_applied) return false;
  current.loose_fraction_applied = wanted;
  current.without_loose = Mesh{};
  if (wanted) {
    current.without_loose = current.mesh;
    remove_loose_pieces(current.without_loose, *wanted);
  }
  return true;
}

const Mesh& App::current_mesh_shown() const {
  const CurrentShape& current = state.current;
  return state.settings.remove_loose_pieces && current.loose_fraction_applied ? current.without_loose : current.mesh;
}

void App::apply_loose_pieces_setting() {
  if (!follow_loose_pieces_setting()) return;
  // A run's previews and an offered preview keep the view until they end.
  if (!state.generation.generating && !state.generation.offered_preview) show_current(false);
}

void App::keep_offered_preview() {
  auto& offered = state.generation.offered_preview;
  if (!offered) return;
  OfferedPreview kept = std::move(*offered);
  log("kept the cancelled run's " + kept.what + " as the current shape (" + std::to_string(kept.mesh.face_count()) +
      " faces)");
  take_current(std::move(kept.mesh), kept.prompt, kept.seed, false);
}

void App::discard_offered_preview() {
  if (!state.generation.offered_preview) return;
  state.generation.offered_preview.reset();
  show_current(false);
}

namespace {

// The entry's settings with what belongs to this machine and window kept.
Result<AppSettings> settings_of_entry(const AppSettings& current, const HistoryEntry& entry) {
  CUBEFORGE_ASSIGN_OR_RETURN(AppSettings merged, settings_from_json(entry.settings));
  merged.model_folder = current.model_folder;
  merged.recent_folders = current.recent_folders;
  merged.export_folder = current.export_folder;
  merged.remove_loose_pieces = current.remove_loose_pieces;
  merged.loose_piece_fraction = current.loose_piece_fraction;
  merged.export_template = current.export_template;
  merged.window_width = current.window_width;
  merged.window_height = current.window_height;
  merged.prompt = entry.prompt;
  merged.seed = entry.seed;
  return merged;
}

}  // namespace

bool App::restore_changes_settings(const HistoryEntry& entry) const {
  auto merged = settings_of_entry(state.settings, entry);
  if (!merged.ok()) return entry.prompt != state.settings.prompt;
  return settings_to_json(*merged) != settings_to_json(state.settings);
}

void App::restore_history(const HistoryEntry& entry, bool take_settings) {
  auto mesh = state.history.store->load_mesh(entry);
  if (!mesh.ok()) {
    log_error("history entry " + entry.id + ": " + mesh.error().to_string());
    return;
  }
  if (take_settings) {
    auto restored = settings_of_entry(state.settings, entry);
    if (restored.ok()) state.settings = *restored;
    else log_error("history entry " + entry.id + " has settings this version cannot read: " + restored.error().message);
  }
  take_current(std::move(*mesh), entry.prompt, entry.seed, true);
  log("restored " + entry.id + ": \"" + entry.prompt + "\"" +
      (take_settings ? std::string() : " (the shape only; your prompt and settings stay)"));
}

void App::reset_camera() {
  engine::OrbitCamera& camera = state.view.camera;
  const engine::ViewRegion region = camera.region;
  camera = engine::OrbitCamera{};
  camera.region = region;
  camera.pitch_degrees = 20.f;
  camera.yaw_degrees = 30.f;
  frame_object();
}

void App::frame_object() {
  VkExtent2D extent = viewport.target->extent();
  if (viewport.renderer->mesh_bounds().empty || extent.height == 0) return;
  state.view.camera.frame(viewport.renderer->mesh_bounds(), float(extent.width) / extent.height);
}

void App::toggle_panels() {
  state.layout.panels_hidden = !state.layout.panels_hidden;
  state.layout.place_panels = true;
  update_layout(*this);  // the panels drawn after this need their places now
}

void App::save_settings_now() {
  Status saved = save_settings(state.settings, state.data_folder / "settings.json");
  if (!saved.ok()) log_error("settings: " + saved.error().to_string());
}

}  // namespace cubeforge::app
