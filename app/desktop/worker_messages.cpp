// The worker's messages, drained once per frame: one handler per message
// type. std::visit picks the handler, so a message type added to
// WorkerMessage without one here does not compile.
#include <cstdio>
#include <variant>

#include "app/desktop/app.h"
#include "app/desktop/core/detail_timing.h"
#include "app/desktop/core/option_labels.h"
#include "engine/image_output.h"
#include "engine/offscreen_target.h"
#include "inference/model/kv_bases.h"

namespace cubeforge::app {

namespace {

// Lists a finished run in the history with a thumbnail of the framed mesh.
void add_to_history(App& app, const worker_message::RunFinished& finished, const GenerationResult& result) {
  AppState& state = app.state;
  const GenerationProgress& progress = state.generation.progress;
  HistoryEntry entry;
  entry.prompt = finished.request.prompt;
  entry.seed = finished.request.seed;
  AppSettings used = state.settings;
  used.prompt = finished.request.prompt;
  used.seed = finished.request.seed;
  used.kv_cache = finished.request.use_kv_cache;
  // How it sampled (a refined candidate samples whatever the settings say).
  const SamplingOptions& sampling = finished.request.sampling;
  used.sampling = !sampling.greedy;
  used.temperature = sampling.temperature;
  used.top_k = sampling.top_k;
  used.top_p = sampling.top_p;
  // What the run decoded with, so that restoring the entry makes it again.
  used.weights = weight_format_name(finished.weights);
  if (finished.request.use_kv_cache) {
    const KvCacheOptions& kv = finished.request.kv_cache;
    used.kv_cache_format = kv_format_name(kv.format);
    used.kv_budget = kv.budget;
    used.kv_rank = kv.low_rank ? kv.low_rank->rank() : 0;
  }
  entry.settings = settings_to_json(used);
  entry.timings.total_ms = finished.wall_ms;
  entry.timings.time_to_first_token_ms = result.time_to_first_token_ms;
  entry.timings.mean_tpot_ms = progress.mean_tpot_ms();
  entry.timings.tokens_per_second = result.tokens_per_second;
  for (int s = 0; s < kAppStageCount; ++s)
    if (progress.stage_ms()[s]) entry.timings.stages_ms[app_stage_name(AppStage(s))] = *progress.stage_ms()[s];
  entry.settings["run"] = finished.label;
  auto added = state.history.store->add(entry, state.current.mesh);
  if (!added.ok()) {
    state.history.problem = "This shape could not be kept in the history: " + added.error().to_string();
    app.log_error(state.history.problem);
    return;
  }
  state.history.problem.clear();
  // The thumbnail: a small offscreen render of the framed mesh.
  engine::Renderer& renderer = *app.viewport.renderer;
  auto thumbnail = engine::OffscreenTarget::create(renderer, engine::OffscreenOptions{128, 128});
  if (thumbnail.ok()) {
    engine::OrbitCamera view;
    view.yaw_degrees = 30.f;
    view.pitch_degrees = 20.f;
    view.frame(renderer.mesh_bounds(), 1.f);
    Status written = engine::save_screenshot(**thumbnail, view, state.view.scene,
                                             state.history.store->thumbnail_path(*added).string());
    if (!written.ok()) app.log_error("history thumbnail: " + written.error().to_string());
  } else {
    app.log_error("history thumbnail: " + thumbnail.error().to_string());
  }
  app.save_settings_now();
}

struct MessageHandler {
  App& app;
  AppState& state = app.state;

  void operator()(worker_message::LoadProgress& m) {
    state.model.load_step = m.step;
    state.model.load_fraction = m.fraction;
  }

  void operator()(worker_message::DetailMeasured& m) {
    if (!m.error.empty()) {
      app.log_error("timing a generation on this machine: " + m.error + " (the detail stays as it is)");
      return;
    }
    if (m.ms <= 0) return;  // cancelled
    AppSettings& settings = state.settings;
    settings.detail_calibration_ms = m.ms;
    if (!settings.resolution_chosen) settings.resolution = default_detail(m.ms);
    char line[200];
    std::snprintf(line, sizeof line, "a generation at resolution %d took %.0f ms here: detail %d, %s per shape%s",
                  m.resolution, m.ms, settings.resolution,
                  expected_time_text(expected_generation_ms(m.ms, settings.resolution)).c_str(),
                  settings.resolution_chosen ? " (as chosen)" : "");
    app.log(line);
    app.save_settings_now();
  }

  void operator()(worker_message::ModelLoaded& m) {
    state.model.loading_folder.clear();
    state.settings.model_folder = m.summary.folder;
    remember_folder(state.settings, m.summary.folder);
    // The panel says what the person has; the log keeps the engine's terms.
    char line[256];
    std::snprintf(line, sizeof line, "model loaded in %.0f ms: %d shape tokens, %s weights", m.summary.load_ms,
                  m.summary.shape_tokens, std::string(weight_format_name(m.summary.weights)).c_str());
    app.log(line + std::string(" (") + m.summary.folder + ")");
    state.model.status = "Model ready, " + weights_in_words(m.summary.weights) + " (loaded in " +
                         std::to_string(static_cast<long long>(m.summary.load_ms + 0.5)) + " ms)";
    state.model.status_detail = line;
    // The demo's figures were of the model (or weights) before: they go with it.
    if (!state.latency.running) state.latency = LatencyDemoState{};
    // So were the candidates: refining one would run another model than made it.
    if (!state.candidates.running) state.candidates = CandidateState{};
    if (!state.script_mode && state.settings.detail_calibration_ms <= 0) state.detail_calibration_due = true;
    if (!m.summary.kv_bases_problem.empty())
      app.log_error(m.summary.kv_bases_problem + " (no KV rank for this model until it is recalibrated)");
    auto card = load_model_card(m.summary.folder);
    state.model.card.reset();
    if (card.ok()) state.model.card = *card;
    else app.log_error(card.error().to_string() + " (the prompt is not checked against it)");
    // A blank prompt opens on the card's first example: the prompt its model
    // was measured to draw best (tools/train/choose_examples.py).
    if (state.model.card && !state.model.card->examples.empty() && prompt_is_blank(state.settings.prompt))
      state.settings.prompt = state.model.card->examples.front();
  }

  void operator()(worker_message::LoadFailed& m) {
    std::string folder = state.model.loading_folder;
    state.model.loading_folder.clear();
    // The model loaded before stays, and so does the weight format it decodes
    // with (else the app would try the failed conversion again and again).
    const auto loaded = app.worker.model_summary();
    if (loaded) {
      const std::string weights(weight_format_name(loaded->weights));
      if (state.settings.weights != weights)
        app.log("the weights stay " + weights + ", as the loaded model has them");
      state.settings.weights = weights;
    }
    // Which model the next Generate uses, said with the failure.
    const std::string in_use = loaded ? "the model in use is still " + loaded->folder : "no model is loaded";
    if (m.error.code == ErrorCode::kCancelled) {
      state.model.status = "Loading cancelled; " + in_use;
      state.model.status_detail.clear();
      app.log("loading " + folder + " cancelled; " + in_use);
    } else {
      state.model.status = "Could not load " + folder + "; " + in_use;
      state.model.status_detail.clear();
      app.log_error("model folder '" + folder + "': " + m.error.to_string() + " (" + in_use + ")");
    }
  }

  void operator()(worker_message::RunStarted& m) {
    state.generation.progress.reset();
    state.generation.weights = m.weights;
    state.generation.kv_cache = m.kv_cache;
    state.generation.run_started = Clock::now();
    state.generation.preview_shown.clear();
    state.generation.run_tokens_per_second.reset();
    state.generation.run_mean_tpot_ms.reset();
  }

  void operator()(worker_message::Event& m) { state.generation.progress.apply(m.event, m.elapsed_ms); }

  void operator()(worker_message::PassStarted& m) {
    state.generation.progress.start_pass(m.name, m.resolution, m.final_pass, m.estimate_ms, m.elapsed_ms);
  }

  void operator()(worker_message::Preview& m) {
    GenerationState& generation = state.generation;
    app.show_mesh(m.mesh, generation.preview_uploads == 0 && state.current.mesh.empty());
    ++generation.preview_uploads;
    char what[96];
    if (m.coarse) std::snprintf(what, sizeof what, "coarse preview at resolution %d", kCoarseResolution);
    else std::snprintf(what, sizeof what, "preview from %d tokens", m.tokens_known);
    generation.preview_shown = what;
    // Kept for a cancel, which offers it instead of throwing it away.
    generation.last_preview = std::move(m.mesh);
    generation.last_preview_what = what;
    note_first_mesh(what);
  }

  // Logs the time from Generate to the first mesh of this run on screen.
  void note_first_mesh(const std::string& what) {
    GenerationState& generation = state.generation;
    if (generation.first_mesh_ms) return;
    generation.first_mesh_ms = ms_between(generation.requested, Clock::now());
    char line[160];
    std::snprintf(line, sizeof line, "first mesh on screen %.0f ms after Generate (%s)", *generation.first_mesh_ms,
                  what.c_str());
    app.log(line);
  }

  void operator()(worker_message::RunFinished& finished) {
    GenerationState& generation = state.generation;
    if (!state.latency.running) generation.generating = false;
    state.frames.last_generation = summarise(state.frames.while_generating_ms);
    const FrameTimeSummary& frames = state.frames.last_generation;
    // Said also when the run ended before a frame was drawn (the window draws
    // on events), so the log never leaves the reader guessing.
    if (frames.frames > 0) {
      char line[200];
      std::snprintf(line, sizeof line,
                    "frame times while generating: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d frames)",
                    frames.mean_ms, frames.p95_ms, frames.max_ms, frames.frames);
      app.log(line);
    } else {
      app.log("frame times while generating: none (the run ended before the next frame)");
    }
    if (!state.frames.key_to_frame_generating_ms.empty()) {
      const FrameTimeSummary keys = summarise(state.frames.key_to_frame_generating_ms);
      char line[200];
      std::snprintf(line, sizeof line,
                    "key press to frame while generating: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d presses)",
                    keys.mean_ms, keys.p95_ms, keys.max_ms, keys.frames);
      app.log(line);
      state.frames.key_to_frame_generating_ms.clear();
    }
    const double elapsed_ms = ms_between(generation.run_started, Clock::now());
    generation.preview_shown.clear();
    if (!finished.result.ok()) {
      const bool cancelled = finished.result.error().code == ErrorCode::kCancelled;
      generation.progress.finish(cancelled ? RunOutcome::kCancelled : RunOutcome::kFailed, elapsed_ms);
      if (cancelled) app.log("generation cancelled: " + generation.progress.status(elapsed_ms));
      else app.log_error("generation failed: " + for_creator(finished.result.error()));
      // A cancelled run's last preview stays on screen, offered to keep; a
      // failed run leaves the current shape on screen.
      if (cancelled && generation.preview_uploads > 0 && !generation.last_preview.empty()) {
        generation.offered_preview = OfferedPreview{std::move(generation.last_preview), generation.last_preview_what,
                                                    finished.request.prompt, finished.request.seed};
        app.log("the cancelled run's " + generation.offered_preview->what +
                " stays on screen: keep it, or go back to the previous shape");
      } else if (generation.preview_uploads > 0) {
        app.show_current(false);
      }
      generation.last_preview = Mesh{};
      return;
    }
    GenerationResult& result = *finished.result;
    if (!result.stats.has_surface) {
      generation.progress.finish(RunOutcome::kFailed, elapsed_ms);
      app.log_error("the decoded shape has no surface at resolution " + std::to_string(finished.request.resolution) +
                    "; try another seed or prompt");
      if (generation.preview_uploads > 0) app.show_current(false);
      generation.last_preview = Mesh{};
      return;
    }
    generation.last_preview = Mesh{};
    const bool first_mesh = state.current.mesh.empty();
    auto upload_started = Clock::now();
    app.take_current(std::move(result.mesh), finished.request.prompt, finished.request.seed,
                     first_mesh || generation.preview_uploads > 0);
    generation.progress.set_upload_ms(ms_between(upload_started, Clock::now()));
    generation.progress.finish(RunOutcome::kDone, finished.wall_ms);
    note_first_mesh("the final mesh");

    if (finished.preview.previews > 0 || finished.preview.skipped > 0) {
      generation.last_preview_cost = finished.preview;
      generation.last_decode_ms_with_preview = result.timings.decode_ms;
    } else {
      generation.last_decode_ms_without_preview = result.timings.decode_ms;
    }
    // The statistics' plots are titled with these figures from now on.
    generation.run_tokens_per_second = result.tokens_per_second;
    generation.run_mean_tpot_ms = generation.progress.mean_tpot_ms();
    char line[320];
    std::snprintf(line, sizeof line,
                  "%s done: %lld faces, total %.0f ms, first token %.1f ms, %.1f tokens/s, TPOT %.2f ms "
                  "(%s weights, KV cache %s)",
                  finished.label.c_str(), static_cast<long long>(result.stats.faces), finished.wall_ms,
                  result.time_to_first_token_ms, *generation.run_tokens_per_second, *generation.run_mean_tpot_ms,
                  std::string(weight_format_name(finished.weights)).c_str(),
                  kv_cache_label(finished.request).c_str());
    app.log(line);
    if (state.history.store) add_to_history(app, finished, result);
  }

  void operator()(worker_message::LatencyRunStarted& m) {
    state.latency.current = m.index;
    state.latency.current_repeat = m.repeat;
  }

  // A demo run's measurement: kept beside the run's others. It is not a
  // generation: no history entry, and the viewport keeps its object.
  void operator()(worker_message::LatencyResult& m) {
    LatencyDemoState& latency = state.latency;
    const bool known = m.index >= 0 && m.index < static_cast<int>(latency.measured.size());
    if (latency.current == m.index) latency.current = -1;
    if (m.available) {
      state.generation.progress.finish(RunOutcome::kDone, m.total_ms);
      char line[320];
      std::snprintf(line, sizeof line,
                    "latency demo, %s (%d of %d): TPOT %.2f ms, first token %.1f ms, tokens %.0f ms, "
                    "%.2f tokens per evaluation (%s weights, KV cache %s)",
                    m.label.c_str(), m.repeat + 1, latency.repeats, m.mean_tpot_ms, m.time_to_first_token_ms,
                    m.total_ms, m.decoding.tokens_per_evaluation(), m.weights.c_str(), m.kv_cache.c_str());
      app.log(line);
      if (known) latency.measured[size_t(m.index)].push_back(std::move(m));
    } else {
      app.log("latency demo, " + m.label + ": not run (" + m.unavailable_reason + ")");
      if (known) latency.not_run[size_t(m.index)] = m.unavailable_reason;
    }
  }

  void operator()(worker_message::LatencyMeshed& m) {
    char line[200];
    if (m.problem.empty())
      std::snprintf(line, sizeof line, "latency demo: meshed once at resolution %d, %lld faces in %.0f ms",
                    m.resolution, static_cast<long long>(m.faces), m.ms);
    else std::snprintf(line, sizeof line, "latency demo: meshing at resolution %d failed", m.resolution);
    app.log(m.problem.empty() ? std::string(line) : std::string(line) + ": " + m.problem);
    state.latency.meshed = std::move(m);
  }

  void operator()(worker_message::LatencyDemoFinished& m) {
    state.latency.running = false;
    state.latency.current = -1;
    state.latency.wall_ms = m.wall_ms;
    state.generation.generating = false;
    char line[120];
    std::snprintf(line, sizeof line, "latency demo %s in %.1f s", m.cancelled ? "cancelled" : "finished",
                  m.wall_ms / 1000);
    app.log(line);
  }

  void operator()(worker_message::CandidateReady& m) {
    CandidateState& candidates = state.candidates;
    Candidate candidate{m.request, std::move(m.mesh), {}, m.wall_ms};
    // The viewport shows each as it arrives; its thumbnail is rendered from there.
    app.show_mesh(candidate.mesh, state.current.mesh.empty() && candidates.items.empty());
    auto thumbnail = app.render_thumbnail(kCandidateCells);
    if (thumbnail.ok()) candidate.thumbnail = std::move(*thumbnail);
    else app.log_error("candidate thumbnail: " + thumbnail.error().to_string());
    candidates.items.push_back(std::move(candidate));
    char line[160];
    std::snprintf(line, sizeof line, "candidate %d, seed %llu: %zu faces in %.0f ms", m.index + 1,
                  static_cast<unsigned long long>(m.request.seed), candidates.items.back().mesh.face_count(),
                  m.wall_ms);
    app.log(line);
  }

  void operator()(worker_message::CandidatesFinished& m) {
    CandidateState& candidates = state.candidates;
    candidates.running = false;
    state.generation.generating = false;
    if (m.cancelled) app.log("candidates cancelled after " + std::to_string(m.made));
    else if (!m.error.empty()) app.log_error("candidates: " + m.error);
    // Until one is picked, the view goes back to the current shape.
    if (!state.current.mesh.empty()) app.show_current(false);
  }

  void operator()(worker_message::Log& m) { state.log.add(m.error, m.text); }
};

}  // namespace

bool handle_worker_messages(App& app) {
  std::vector<WorkerMessage> messages = app.worker.drain();
  for (WorkerMessage& message : messages) std::visit(MessageHandler{app}, message);
  return !messages.empty();
}

}  // namespace cubeforge::app
