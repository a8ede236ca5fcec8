// The generation worker thread: see generation_worker.h.
#include "app/desktop/core/generation_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "app/desktop/core/option_labels.h"
#include "inference/core/file_io.h"
#include "inference/cpu/ops.h"
#include "inference/decoding/decoding.h"
#include "inference/model/kv_bases.h"
#include "inference/planning/plan.h"

namespace cubeforge::app {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Generation yields to the UI when they compete for cores: its threads run at
// a lower priority (Linux nice is per thread and inherited by threads a
// thread creates). Failing to lower it only costs smoothness.
constexpr int kGenerationNice = 5;
void lower_this_thread_priority() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kGenerationNice);
}

}  // namespace

const CudaAvailability& cuda_backend_availability() {
  static const CudaAvailability availability = cuda_availability();
  return availability;
}

std::string kv_cache_label(const std::string& format, int budget, int rank) {
  std::string label = format;
  if (budget > 0) label += ", budget " + std::to_string(budget);
  if (rank > 0) label += ", rank " + std::to_string(rank);
  return label;
}

std::string kv_cache_label(const GenerationRequest& request) {
  if (!request.use_kv_cache) return "none";
  const KvCacheOptions& kv = request.kv_cache;
  return kv_cache_label(std::string(kv_format_name(kv.format)), kv.budget, kv.low_rank ? kv.low_rank->rank() : kv.rank);
}

Status GenerationWorker::can_run(const GenerationRequest& request) const {
  auto loaded = model();
  if (!loaded) return ok_status();
  return cubeforge::can_run(*loaded, request_for_model(request, *loaded));
}

Status GenerationWorker::backend_supports(BackendChoice choice, const GenerationRequest& request) const {
  auto loaded = model();
  if (!loaded) return ok_status();
  return choice_supports(choice, loaded->gpt(), request_for_model(request, *loaded).backend_request());
}

Result<GenerationRequest> GenerationWorker::plan(const CubeModel& model, const GenerationRequest& request) {
  CUBEFORGE_ASSIGN_OR_RETURN(PlannedGeneration planned,
                             plan_generation(model, request_for_model(request, model), &plan_cache_));
  if (planned.backend_reason != last_backend_reason_) {
    messages_.push(worker_message::Log{false, "backend: " + planned.backend_reason});
    last_backend_reason_ = planned.backend_reason;
  }
  return std::move(planned.request);
}

GenerationWorker::GenerationWorker(int generation_threads) {
  if (generation_threads <= 0) {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    generation_threads = std::max(1, cores - 1);
  }
  // The pool's threads are created here, from a thread that has already
  // lowered its priority, so they inherit it.
  std::thread([generation_threads] {
    lower_this_thread_priority();
    cpu::set_thread_count(generation_threads);
  }).join();
}

GenerationWorker::~GenerationWorker() {
  cancel();
  hold_jobs(false);
  if (job_.joinable()) job_.join();
}

void GenerationWorker::cancel() {
  {
    // Under the lock, so that a job about to wait on a hold sees the flag or the wake-up.
    std::lock_guard lock(hold_mutex_);
    cancel_.store(true);
  }
  hold_released_.notify_all();
}

void GenerationWorker::hold_after_previews(bool held) {
  {
    std::lock_guard lock(hold_mutex_);
    previews_held_ = held;
  }
  hold_released_.notify_all();
}

void GenerationWorker::wait_if_previews_held() {
  std::unique_lock lock(hold_mutex_);
  hold_released_.wait(lock, [this] { return !previews_held_ || cancel_.load(); });
}

void GenerationWorker::hold_jobs(bool held) {
  {
    std::lock_guard lock(hold_mutex_);
    jobs_held_ = held;
  }
  hold_released_.notify_all();
}

bool GenerationWorker::start(std::function<void()> job) {
  if (busy_.load()) return false;
  if (job_.joinable()) job_.join();  // the previous job has posted everything and is ending
  cancel_.store(false);
  busy_.store(true);
  job_ = std::jthread([this, job = std::move(job)] {
    lower_this_thread_priority();
    {
      std::unique_lock lock(hold_mutex_);
      hold_released_.wait(lock, [this] { return !jobs_held_; });
    }
    try {
      job();
    } catch (const std::bad_alloc&) {
      messages_.push(worker_message::Log{true, "out of memory: the job stopped; try a lower resolution or a "
                                               "smaller model"});
    }
    busy_.store(false);
  });
  return true;
}

std::shared_ptr<const CubeModel> GenerationWorker::model() const {
  std::lock_guard lock(model_mutex_);
  return model_;
}

bool GenerationWorker::has_model() const { return model() != nullptr; }

float ModelSummary::threshold_for(float diffusion_threshold) const {
  DiffusionOptions asked;
  asked.threshold = diffusion_threshold;
  return diffusion_options_for_model(asked, gpt).threshold;
}

float ModelSummary::guidance_for(float guidance) const { return guidance_for_model(guidance, gpt); }

std::optional<ModelSummary> GenerationWorker::model_summary() const {
  std::lock_guard lock(model_mutex_);
  return summary_;
}

bool GenerationWorker::load_model(const std::filesystem::path& folder, const WeightOptions& weights) {
  return start([this, folder, weights] {
    auto started = Clock::now();
    auto loaded = CubeModel::load(
        folder,
        [this](const std::string& step, double fraction) {
          messages_.push(worker_message::LoadProgress{step, fraction});
          return !cancel_.load();
        },
        weights);
    if (!loaded.ok()) {
      messages_.push(worker_message::LoadFailed{loaded.error()});
      return;
    }
    ModelSummary summary;
    summary.folder = folder.string();
    summary.shape_tokens = loaded->shape_tokens();
    summary.load_ms = ms_since(started);
    summary.block_diffusion = loaded->gpt().config().block_diffusion();
    summary.gpt = loaded->gpt().config();
    summary.weights = loaded->gpt().weight_options().format;
    // Read once here so that the settings can offer the ranks the bases hold.
    const auto bases_path = folder / kKvBasesFile;
    if (auto kind = file_kind(bases_path); kind.ok() && *kind != FileKind::kMissing) {
      auto bases = LowRankKv::load(bases_path, loaded->config().gpt, 1);
      if (bases.ok()) summary.kv_bases_rank = (*bases)->max_rank();
      else summary.kv_bases_problem = bases.error().message;
    }
    plan_cache_ = PlanCache{};  // opened and read for the previous model
    last_backend_reason_.clear();
    autoregressive_models_.clear();
    {
      std::lock_guard lock(model_mutex_);
      model_ = std::make_shared<const CubeModel>(std::move(*loaded));
      summary_ = summary;
    }
    messages_.push(worker_message::ModelLoaded{summary});
  });
}

int GenerationWorker::announce_run(const CubeModel& model, const GenerationRequest& request, const std::string& label) {
  const int run = next_run_++;
  const WeightFormat weights = model.gpt().weight_options().format;
  messages_.push(worker_message::RunStarted{run, label, model.shape_tokens(), std::string(weight_format_name(weights)),
                                            kv_cache_label(request)});
  return run;
}

worker_message::RunFinished GenerationWorker::run_generation(const CubeModel& model, const GenerationRequest& request,
                                                             const PreviewOptions& preview,
                                                             const std::string& label) {
  const int run = announce_run(model, request, label);
  const int token_count = model.shape_tokens();
  const WeightFormat weights = model.gpt().weight_options().format;
  const auto started = Clock::now();

  PreviewCost cost;
  // By position: block diffusion decides tokens out of order.
  std::vector<int> tokens(static_cast<size_t>(token_count), -1);
  std::vector<int> token_steps(static_cast<size_t>(token_count), -1);
  int known = 0;
  Clock::time_point decode_started = started;
  auto sink = [&](const GenerationEvent& event) {
    messages_.push(worker_message::Event{run, event, ms_since(started)});
    if (event.kind == GenerationEvent::Kind::kStageStarted && event.stage == Stage::kDecode)
      decode_started = Clock::now();
    if (event.kind == GenerationEvent::Kind::kStageFinished && event.stage == Stage::kDecode)
      cost.decode_ms = event.stage_ms;
    if (event.kind != GenerationEvent::Kind::kToken) return;
    if (event.token_index < 0 || event.token_index >= token_count) return;
    if (tokens[size_t(event.token_index)] < 0) ++known;
    tokens[size_t(event.token_index)] = event.token;
    token_steps[size_t(event.token_index)] = event.decode_step;
    if (!preview.enabled || known % std::max(1, preview.every_tokens) != 0 || known >= token_count) return;
    // Budget: the previews so far plus the next one must stay within the
    // allowed share of the time spent on tokens. The next one's cost is the
    // last measured preview; with none measured yet, this one runs and measures it.
    const double pure_decode_ms = ms_since(decode_started) - cost.preview_ms;
    std::optional<double> estimate = preview_estimate_ms_;
    if (preview_estimate_resolution_ != preview.resolution) estimate.reset();
    if (estimate && cost.preview_ms + *estimate > preview.max_decode_overhead * pure_decode_ms) {
      ++cost.skipped;
      return;
    }
    // The shape decoder needs all N tokens: a missing one repeats the nearest known one before it
    // (after it, for missing ones at the start).
    std::vector<int> padded = tokens;
    int latest = *std::find_if(tokens.begin(), tokens.end(), [](int t) { return t >= 0; });
    for (int& t : padded) t = t >= 0 ? (latest = t) : latest;
    MeshingOptions options;
    options.resolution = preview.resolution;
    options.target_faces = -1;
    const auto preview_started = Clock::now();
    auto mesh = tokens_to_mesh(model, padded, options, {}, &cancel_);
    const double preview_ms = ms_since(preview_started);
    cost.preview_ms += preview_ms;
    ++cost.previews;
    preview_estimate_ms_ = preview_ms;
    preview_estimate_resolution_ = preview.resolution;
    if (mesh.ok() && !mesh->mesh.empty()) {
      messages_.push(worker_message::Preview{run, std::move(mesh->mesh), known, preview_ms, false, ms_since(started)});
      wait_if_previews_held();
    }
  };
  worker_message::RunFinished finished;
  finished.run = run;
  finished.label = label;
  finished.request = request;
  finished.request.token_backend = nullptr;  // the history must not keep a GPU's weights alive
  finished.weights = weights;
  finished.result = mesh_in_passes(model, request, preview, run, started, sink);
  finished.preview = cost;
  finished.wall_ms = ms_since(started);
  finished.token_steps = std::move(token_steps);
  return finished;
}

Result<GenerationResult> GenerationWorker::mesh_in_passes(const CubeModel& model, const GenerationRequest& request,
                                                          const PreviewOptions& preview, int run,
                                                          Clock::time_point started,
                                                          const GenerationEventSink& sink) {
  CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult tokens,
                             generate_shape_tokens(model, request_for_model(request, model), sink, &cancel_));
  if (preview.coarse_pass && request.resolution > kCoarseResolution) {
    messages_.push(worker_message::PassStarted{run, "coarse preview", kCoarseResolution, false, coarse_pass_ms_,
                                               ms_since(started)});
    MeshingOptions coarse;
    coarse.resolution = kCoarseResolution;
    coarse.coarse_to_fine = request.coarse_to_fine;
    coarse.vertex_mapping = request.vertex_mapping;
    coarse.remove_floaters = request.remove_floaters;
    coarse.target_faces = -1;
    const auto pass_started = Clock::now();
    // Its stage events stay here: the statistics show the final pass's stages.
    auto mesh = tokens_to_mesh(model, tokens.tokens, coarse, {}, &cancel_);
    if (!mesh.ok()) return mesh.take_error();
    coarse_pass_ms_ = ms_since(pass_started);
    if (!mesh->mesh.empty()) {
      messages_.push(worker_message::Preview{run, std::move(mesh->mesh), static_cast<int>(tokens.tokens.size()),
                                             *coarse_pass_ms_, true, ms_since(started)});
      wait_if_previews_held();
      if (cancel_.load()) return make_error(ErrorCode::kCancelled, "cancelled after the coarse preview");
    }
  }
  // The final pass's estimate: its last time at this resolution, else the
  // coarse pass's scaled by how the surface's cells grow (4x per level).
  std::optional<double> estimate;
  if (auto known = final_pass_ms_.find(request.resolution); known != final_pass_ms_.end()) estimate = known->second;
  else if (coarse_pass_ms_ && request.resolution > kCoarseResolution)
    estimate = *coarse_pass_ms_ * std::pow(4.0, request.resolution - kCoarseResolution);
  messages_.push(worker_message::PassStarted{run, "refining", request.resolution, true, estimate, ms_since(started)});
  const auto final_started = Clock::now();
  CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult result, mesh_shape_tokens(model, request, tokens, sink, &cancel_));
  final_pass_ms_[request.resolution] = ms_since(final_started);
  return result;
}

bool GenerationWorker::generate(const GenerationRequest& request, const PreviewOptions& preview) {
  auto loaded = model();
  if (!loaded) return false;
  return start([this, loaded, request, preview] {
    auto opened = plan(*loaded, request);
    if (!opened.ok()) {
      worker_message::RunFinished failed;
      failed.label = "generate";
      failed.request = request;
      failed.weights = loaded->gpt().weight_options().format;
      failed.result = opened.take_error();
      messages_.push(std::move(failed));
      return;
    }
    messages_.push(run_generation(*loaded, *opened, preview, "generate"));
  });
}

GenerationRequest candidate_request(GenerationRequest request, int index) {
  request.seed += static_cast<uint64_t>(index);
  if (request.sampling.greedy) {
    // Greedy decoding ignores the seed; candidates sample as the reference's
    // sampling path does (top-p 0.9).
    request.sampling.greedy = false;
    request.sampling.temperature = 1.f;
    request.sampling.top_k = 0;
    request.sampling.top_p = 0.9f;
  }
  request.resolution = std::min(request.resolution, kCandidateResolution);
  return request;
}

bool GenerationWorker::generate_candidates(const GenerationRequest& request, int count) {
  auto loaded = model();
  if (!loaded || count < 1) return false;
  return start([this, loaded, request, count] {
    worker_message::CandidatesFinished done;
    auto opened = plan(*loaded, request);
    if (!opened.ok()) {
      done.error = for_creator(opened.error());
      messages_.push(done);
      return;
    }
    for (int i = 0; i < count; ++i) {
      GenerationRequest one = candidate_request(*opened, i);
      const auto started = Clock::now();
      auto result = generate_shape(*loaded, request_for_model(one, *loaded), {}, &cancel_);
      if (!result.ok()) {
        done.cancelled = result.error().code == ErrorCode::kCancelled;
        if (!done.cancelled) done.error = for_creator(result.error());
        break;
      }
      one.token_backend = nullptr;  // the gallery must not keep a GPU's weights alive
      messages_.push(worker_message::CandidateReady{i, one, std::move(result->mesh), ms_since(started)});
      ++done.made;
    }
    messages_.push(done);
  });
}

bool GenerationWorker::measure_detail_cost(const GenerationRequest& request) {
  auto loaded = model();
  if (!loaded) return false;
  return start([this, loaded, request] {
    worker_message::DetailMeasured measured;
    measured.resolution = request.resolution;
    auto opened = plan(*loaded, request);
    if (!opened.ok()) {
      measured.error = for_creator(opened.error());
      messages_.push(measured);
      return;
    }
    const auto started = Clock::now();
    auto result = generate_shape(*loaded, request_for_model(*opened, *loaded), {}, &cancel_);
    if (result.ok())
      measured.ms = ms_since(started);
    else if (result.error().code != ErrorCode::kCancelled)
      measured.error = for_creator(result.error());
    messages_.push(measured);
  });
}

GenerationRequest request_for_model(GenerationRequest request, const CubeModel& model) {
  if (model.gpt().config().block_diffusion() && request.decoding.mode == DecodingMode::kSequential)
    request.decoding.mode = DecodingMode::kDiffusion;
  return request;
}

std::vector<LatencyRun> latency_demo_runs(const LatencyDemoChoice& choice) {
  // Beside a block-diffusion model, the token-by-token runs decode with the
  // autoregressive model given, else they cannot run.
  const bool beside = choice.block_diffusion_model && !choice.autoregressive_model.empty();
  const std::string by_blocks = choice.block_diffusion_model && !beside
                                    ? "this block-diffusion model decodes by blocks, not token by token"
                                    : "";
  std::string cuda = cuda_backend_availability().available
                         ? std::string()
                         : "needs the CUDA backend: " + cuda_backend_availability().why_not;
  if (cuda.empty()) cuda = by_blocks;
  if (cuda.empty() && beside) cuda = "the autoregressive model beside a block-diffusion one decodes on the CPU";
  std::vector<LatencyRun> runs = {
      {"No cache", "every token recomputes the whole sequence so far", false, {}, by_blocks},
      {"KV cache", "every token reuses the keys and values of the tokens before it", true, {}, by_blocks},
  };
  // The cache is compared with no cache; everything after it with the cache,
  // the token-by-token decoding it would replace.
  runs[1].baseline = 0;
  constexpr int kWithTheCache = 1;
  if (choice.kv_cache != "f32") {
    LatencyRun smaller{"Smaller KV cache",
                       "KV cache " + choice.kv_cache +
                           ": fewer bytes of keys and values to read per token; the tokens may differ from the "
                           "exact cache's",
                       true, {}, by_blocks};
    smaller.chosen_kv_cache = true;
    smaller.baseline = kWithTheCache;
    runs.push_back(smaller);
  }
  runs.push_back({"KV cache + CUDA graphs", "the GPU replays each token's work in one launch", true, {}, cuda, true,
                  false, kWithTheCache});
  if (beside)
    for (LatencyRun& run : runs) {
      run.model_folder = choice.autoregressive_model;
      run.what += "; the autoregressive model " + choice.autoregressive_model + ", on the same prompt";
    }
  // A block-diffusion model has no other parallel decoding.
  const DecodingMode parallel = choice.block_diffusion_model ? DecodingMode::kDiffusion : choice.parallel;
  if (parallel == DecodingMode::kJacobi) {
    DecodingOptions paying, always;
    paying.mode = always.mode = DecodingMode::kJacobi;
    always.jacobi.position_cost = 0.f;
    runs.push_back({"Exact parallel", "guesses the next tokens and checks them in one step where that pays: "
                    "the same tokens", true, paying, by_blocks, false, false, kWithTheCache});
    runs.push_back({"Exact parallel, always guessing", "a guess at every step: several slots per step when it "
                    "is right, the same tokens", true, always, by_blocks, false, false, kWithTheCache});
  } else if (parallel == DecodingMode::kDiffusion) {
    const std::string needs_model =
        choice.block_diffusion_model ? "" : "needs a block-diffusion model folder, such as assets/model-diffusion";
    struct CacheRun {
      DiffusionCache cache;
      const char* name;
      const char* what;
    };
    const CacheRun caches[] = {
        {DiffusionCache::kNone, "Block diffusion, no cache", "every step recomputes every position so far"},
        {DiffusionCache::kPrefix, "Block diffusion, prefix cache", "finished blocks' keys and values are reused"},
        {DiffusionCache::kDual, "Block diffusion, dual cache",
         "the rest of the block is reused too, refreshed once per sub-block"}};
    // On a block-diffusion model, which has no token-by-token run, the
    // caches are compared with block diffusion without one.
    const int without_a_cache = static_cast<int>(runs.size());
    for (const auto& [cache, name, what] : caches) {
      DecodingOptions options;
      options.mode = DecodingMode::kDiffusion;
      options.diffusion.cache = cache;
      options.diffusion.threshold = choice.diffusion_threshold;
      const int baseline = !choice.block_diffusion_model || beside ? kWithTheCache
                           : cache == DiffusionCache::kNone ? -1
                                                            : without_a_cache;
      runs.push_back({name, std::string(what) + "; many slots per step", true, options, needs_model, false, false,
                      baseline});
    }
  }
  return runs;
}

worker_message::LatencyResult GenerationWorker::measure_latency_run(const CubeModel& model,
                                                                     const GenerationRequest& request,
                                                                     const std::string& label,
                                                                     Result<GenerationResult>& tokens) {
  const int run = announce_run(model, request, label);
  const int token_count = model.shape_tokens();
  const WeightFormat weights = model.gpt().weight_options().format;
  const auto started = Clock::now();
  std::vector<int> token_steps(static_cast<size_t>(token_count), -1);
  auto sink = [&](const GenerationEvent& event) {
    messages_.push(worker_message::Event{run, event, ms_since(started)});
    if (event.kind == GenerationEvent::Kind::kToken && event.token_index >= 0 && event.token_index < token_count)
      token_steps[size_t(event.token_index)] = event.decode_step;
  };
  tokens = generate_shape_tokens(model, request_for_model(request, model), sink, &cancel_);
  worker_message::LatencyResult bar;
  bar.label = label;
  bar.weights = weight_format_name(weights);
  bar.kv_cache = kv_cache_label(request);
  bar.model = model.folder().string();
  if (!tokens.ok()) {
    bar.available = false;
    bar.unavailable_reason = for_creator(tokens.error());
    return bar;
  }
  const GenerationResult& r = *tokens;
  // Tokens after the first evaluation (the prefill's one, or several with block diffusion).
  const int first_step = r.decoding.tokens_per_step.empty() ? 1 : r.decoding.tokens_per_step[0];
  const double decode_tokens = double(r.tokens.size()) - first_step;
  bar.mean_tpot_ms = decode_tokens > 0 ? r.timings.decode_ms / decode_tokens : 0.0;
  bar.time_to_first_token_ms = r.time_to_first_token_ms;
  bar.total_ms = ms_since(started);
  bar.stages = r.timings;
  bar.decoding = r.decoding;
  bar.tokens = r.tokens;
  bar.token_steps = std::move(token_steps);
  return bar;
}

Result<std::shared_ptr<const CubeModel>> GenerationWorker::autoregressive_model(const std::string& folder,
                                                                              const CubeModel& loaded) {
  auto found = autoregressive_models_.find(folder);
  if (found == autoregressive_models_.end()) {
    messages_.push(worker_message::Log{false, "latency demo: reading the autoregressive model " + folder +
                                                  " to decode token by token beside the block-diffusion one"});
    CUBEFORGE_ASSIGN_OR_RETURN(CubeModel model,
                               CubeModel::load(folder, [this](const std::string&, double) { return !cancel_.load(); },
                                               loaded.gpt().weight_options()));
    found = autoregressive_models_.emplace(folder, std::make_shared<const CubeModel>(std::move(model))).first;
  }
  const CubeModel& model = *found->second;
  if (model.gpt().config().block_diffusion())
    return make_error(ErrorCode::kInvalidArgument, "'" + folder + "' is a block-diffusion model too; token-by-token "
                                                   "decoding needs an autoregressive one");
  if (model.shape_tokens() != loaded.shape_tokens())
    return make_error(ErrorCode::kInvalidArgument,
                      "'" + folder + "' decodes " + std::to_string(model.shape_tokens()) +
                          " tokens per shape and the loaded model " + std::to_string(loaded.shape_tokens()) +
                          "; compare models of one shape tokenizer");
  return found->second;
}

bool GenerationWorker::run_latency_demo(const GenerationRequest& request, std::vector<LatencyRun> runs,
                                        int repeats) {
  auto loaded = model();
  if (!loaded || repeats < 1) return false;
  return start([this, loaded, request, runs = std::move(runs), repeats] {
    const auto demo_started = Clock::now();
    auto finish = [&](bool cancelled) {
      messages_.push(worker_message::LatencyDemoFinished{cancelled, ms_since(demo_started)});
    };
    // The demo compares decodings of one token sequence, so every run is
    // greedy (exact parallel decoding reproduces greedy decoding). The exact
    // cache's request opens the backend; the chosen cache runs on it when
    // that backend supports it, else on the CPU.
    GenerationRequest greedy = request;
    greedy.sampling.greedy = true;
    GenerationRequest exact = greedy;
    exact.kv_cache = KvCacheOptions{};
    auto opened = plan(*loaded, exact);
    GenerationRequest chosen_request = greedy;
    chosen_request.use_kv_cache = true;
    auto chosen = plan(*loaded, chosen_request);
    const bool on_cuda = opened.ok() && opened->token_backend && opened->token_backend->kind() == BackendKind::kCuda;
    // Each run's model and request, or why it cannot run (said once).
    std::vector<std::optional<GenerationRequest>> requests(runs.size());
    std::vector<std::shared_ptr<const CubeModel>> models(runs.size(), loaded);
    std::vector<size_t> runnable;
    for (size_t index = 0; index < runs.size(); ++index) {
      const LatencyRun& run = runs[index];
      std::string unavailable = run.unavailable_reason;
      if (unavailable.empty() && run.cuda_graphs && !on_cuda)
        unavailable = !opened.ok() ? for_creator(opened.error()) : "CUDA graphs need the CUDA backend (choose Auto or CUDA)";
      if (unavailable.empty() && run.chosen_kv_cache && !chosen.ok()) unavailable = for_creator(chosen.error());
      if (unavailable.empty() && !run.model_folder.empty()) {
        auto other = autoregressive_model(run.model_folder, *loaded);
        if (!other.ok() && other.error().code == ErrorCode::kCancelled) return finish(true);
        if (!other.ok()) unavailable = other.error().message;
        else models[index] = *other;
        // The KV rank's bases belong to the loaded model.
        if (unavailable.empty() && run.chosen_kv_cache && chosen->kv_cache.low_rank)
          unavailable = "a KV rank is calibrated for the loaded model, not for '" + run.model_folder + "'";
      }
      // A run that cannot run says why, once.
      auto say_unavailable = [&](const std::string& why) {
        worker_message::LatencyResult bar;
        bar.index = static_cast<int>(index);
        bar.label = run.name;
        bar.available = false;
        bar.unavailable_reason = why;
        messages_.push(bar);
      };
      if (!unavailable.empty()) {
        say_unavailable(unavailable);
        continue;
      }
      GenerationRequest varied = opened.ok() ? *opened : exact;
      // The backend opened holds the loaded model's weights: another model decodes on the CPU.
      if (!opened.ok() || models[index] != loaded) {
        varied.backend = BackendChoice::kCpu;
        varied.token_backend = nullptr;
      }
      varied.use_kv_cache = run.kv_cache;
      varied.cuda_graphs = run.cuda_graphs;
      varied.decoding = run.decoding;
      if (run.chosen_kv_cache) varied.kv_cache = chosen->kv_cache;
      // What the opened backend does not run (parallel decoding, some KV ranks) runs on the CPU backend.
      if (varied.token_backend && !varied.token_backend->supports(varied.backend_request()).ok()) {
        varied.backend = BackendChoice::kCpu;
        varied.token_backend = nullptr;
      }
      // What the model or the backend refuses is said before the rounds, not in each.
      if (Status runs_here = cubeforge::can_run(*models[index], request_for_model(varied, *models[index]));
          !runs_here.ok()) {
        say_unavailable(for_creator(runs_here.error()));
        continue;
      }
      requests[index] = std::move(varied);
      runnable.push_back(index);
    }
    // Rounds of every run, forwards then backwards: each run's measurements
    // spread over the whole demo rather than one stretch of it.
    std::optional<GenerationResult> last_tokens;
    int last_index = -1;
    for (int round = 0; round < repeats; ++round) {
      std::vector<size_t> order = runnable;
      if (round % 2) std::reverse(order.begin(), order.end());
      for (size_t index : order) {
        messages_.push(worker_message::LatencyRunStarted{static_cast<int>(index), round});
        Result<GenerationResult> tokens = make_error(ErrorCode::kInternal, "not run");
        worker_message::LatencyResult bar =
            measure_latency_run(*models[index], *requests[index], runs[index].name, tokens);
        bar.index = static_cast<int>(index);
        bar.repeat = round;
        messages_.push(std::move(bar));
        if (!tokens.ok() && tokens.error().code == ErrorCode::kCancelled) return finish(true);
        if (tokens.ok()) {
          last_tokens = std::move(*tokens);
          last_index = static_cast<int>(index);
        }
      }
    }
    // One meshing, coarse: the demo measures decoding.
    if (last_tokens) {
      GenerationRequest coarse = *requests[size_t(last_index)];
      coarse.resolution = std::min(coarse.resolution, kLatencyDemoResolution);
      worker_message::LatencyMeshed meshed;
      meshed.index = last_index;
      meshed.resolution = coarse.resolution;
      const auto mesh_started = Clock::now();
      auto mesh = mesh_shape_tokens(*models[size_t(last_index)], coarse, *last_tokens, {}, &cancel_);
      meshed.ms = ms_since(mesh_started);
      if (!mesh.ok() && mesh.error().code == ErrorCode::kCancelled) return finish(true);
      if (mesh.ok()) meshed.faces = mesh->stats.faces;
      else meshed.problem = mesh.error().to_string();
      messages_.push(std::move(meshed));
    }
    finish(false);
  });
}

}  // namespace cubeforge::app
