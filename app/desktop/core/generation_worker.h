// Model loading and generation off the UI thread.
//
// One job at a time runs on a std::jthread: loading a model folder (its
// decode matrices converted to the weight format asked for), a generation
// (with optional progressive previews), or the latency demo (the same request
// with and without the KV cache, each variant several times).
//
// A KV rank is a number in the job's arguments, not in the request: its
// bases are the model folder's kv_bases.safetensors, which the worker reads
// once per model and rank. Every run says which weights and KV cache it used.
//
// A generation meshes in passes once its tokens are done: a coarse one at
// kCoarseResolution (milliseconds on the built-in model) whose mesh goes to
// the viewport at once, then the requested resolution, which replaces it.
// Each pass is announced with an estimate of its time: the same pass's last
// measured time, else the coarse pass's scaled by the surface's growth. Everything a job learns goes
// to the UI as WorkerMessages through a mutex-protected queue that the UI
// drains once per frame; every event carries the wall time since its run
// started. cancel() sets the flag the pipeline checks between tokens and
// between occupancy batches, so a generation stops within one token.
//
// A job's last message is queued before busy() turns false, so a UI that
// sees busy() == false and then drains has every message of that job.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "app/desktop/core/latency_statistics.h"
#include "app/desktop/core/message_queue.h"
#include "inference/planning/plan.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::app {

struct ModelSummary {
  std::string folder;
  int shape_tokens = 0;
  double load_ms = 0;
  bool block_diffusion = false;  // decodes by blocks (gpt_model.block_diffusion), never token by token
  GptConfig gpt;                 // what decides how it decodes (gpt_model in its config.yaml)
  // The threshold a block diffusion of this model runs at under the setting
  // `diffusion_threshold` (0: the model's; diffusion_options_for_model).
  float threshold_for(float diffusion_threshold) const;
  // The guidance scale a generation runs at under the setting `guidance`
  // (kModelGuidance: the model's; guidance_for_model).
  float guidance_for(float guidance) const;
  WeightFormat weights = WeightFormat::kStored;  // the format it decodes with
  // The largest KV rank the folder's kv_bases.safetensors holds (0: none), or
  // why the file there cannot be used.
  int kv_bases_rank = 0;
  std::string kv_bases_problem;
};

// What a run used, as the app shows it: "f32", "int8, budget 32, rank 16";
// "none" without the cache.
std::string kv_cache_label(const std::string& format, int budget, int rank);
std::string kv_cache_label(const GenerationRequest& request);

// A block-diffusion model decodes only by blocks: a request for sequential
// decoding becomes block diffusion with the request's diffusion options.
GenerationRequest request_for_model(GenerationRequest request, const CubeModel& model);

// Candidates are meshed this coarsely at most: enough to choose among them.
constexpr int kCandidateResolution = 6;
// The request a candidate is made with: sampled, at most kCandidateResolution.
GenerationRequest candidate_request(GenerationRequest request, int index);

// The coarse pass's resolution: (2^5 + 1)^3 grid points.
constexpr int kCoarseResolution = 5;
// The latency demo meshes once, this coarsely at most: it measures decoding.
constexpr int kLatencyDemoResolution = kCoarseResolution;

struct PreviewOptions {
  bool enabled = false;
  int every_tokens = 8;
  int resolution = 4;
  // Previews run on the decode thread; one is skipped when the time spent on
  // previews, with the next one's estimated cost, would exceed this share of
  // the pure decode time so far. The first one always runs: it measures the cost.
  double max_decode_overhead = 0.5;
  // A coarse mesh as soon as the tokens are done, before the requested resolution.
  bool coarse_pass = true;
};

// What progressive previews cost in one run.
struct PreviewCost {
  int previews = 0;
  int skipped = 0;         // due previews left out to respect the budget
  double preview_ms = 0;   // total time in preview decodes
  double decode_ms = 0;    // the decode stage, previews included
  double overhead() const { return decode_ms - preview_ms > 0 ? preview_ms / (decode_ms - preview_ms) : 0.0; }
};

namespace worker_message {
struct LoadProgress { std::string step; double fraction = 0; };
struct ModelLoaded { ModelSummary summary; };
struct LoadFailed { Error error; };  // ErrorCode::kCancelled when the user cancelled
struct RunStarted {
  int run = 0;
  std::string label;
  int token_count = 0;
  std::string weights, kv_cache;  // what it runs with (kv_cache_label)
};
struct Event { int run = 0; GenerationEvent event; double elapsed_ms = 0; };
// A mesh to show before the run's own: from the tokens so far (tokens_known <
// token_count) or the coarse pass of all of them (coarse).
struct Preview {
  int run = 0;
  Mesh mesh;
  int tokens_known = 0;
  double decode_ms = 0;
  bool coarse = false;
  double elapsed_ms = 0;  // since the run started
};
// A meshing pass begins: "coarse preview", then "refining" at the requested resolution.
struct PassStarted {
  int run = 0;
  std::string name;
  int resolution = 0;
  bool final_pass = true;
  std::optional<double> estimate_ms;
  double elapsed_ms = 0;
};
struct RunFinished {
  int run = 0;
  std::string label;
  GenerationRequest request;  // with the KV rank's bases it ran with
  WeightFormat weights = WeightFormat::kStored;
  Result<GenerationResult> result = make_error(ErrorCode::kInternal, "not run");
  PreviewCost preview;
  double wall_ms = 0;
  // By position: the model evaluation that chose each token (-1: none did,
  // the run stopped first). Several tokens share one with parallel decoding.
  std::vector<int> token_steps;
};
// One run of the latency demo begins (index into latency_demo_runs(); repeat
// from 0 to the demo's repeats - 1).
struct LatencyRunStarted { int index = 0; int repeat = 0; };
// One measurement of one of the latency demo's runs: its tokens alone, from
// the prompt to the last token (the demo measures decoding and meshes once,
// LatencyMeshed). A run that cannot run says why once, with repeat 0.
struct LatencyResult {
  int index = 0;
  int repeat = 0;
  std::string label;
  bool available = true;
  std::string unavailable_reason;
  std::string weights, kv_cache;  // what it ran with (kv_cache_label)
  std::string model;  // the folder of the model it decoded with
  // total_ms: the object's tokens, from the prompt to the last token.
  double mean_tpot_ms = 0, time_to_first_token_ms = 0, total_ms = 0;
  StageTimings stages;  // where the object's time went (text, first token, tokens)
  DecodingStats decoding;  // model evaluations and the tokens each accepted
  std::vector<int> tokens;
  std::vector<int> token_steps;  // as RunFinished::token_steps
};
// The demo's one meshing: the last run's tokens at a low resolution, to show
// that they make a shape; the same work for every run, so not compared. It
// goes neither to the viewport nor to the history.
struct LatencyMeshed {
  int index = 0;  // the run whose tokens it meshed
  int resolution = 0;
  double ms = 0;
  int64_t faces = 0;
  std::string problem;  // empty: meshed (with or without a surface)
};
// wall_ms: the whole demo, from its start to its last message.
struct LatencyDemoFinished { bool cancelled = false; double wall_ms = 0; };
// One of several seeds of one prompt, meshed at the candidates' resolution.
struct CandidateReady {
  int index = 0;
  GenerationRequest request;  // what made it: refining it is this request at a higher resolution
  Mesh mesh;
  double wall_ms = 0;
};
struct CandidatesFinished { int made = 0; bool cancelled = false; std::string error; };
struct Log { bool error = false; std::string text; };
// How long one whole generation took at `resolution` (measure_detail_cost);
// ms 0 with an error, or with neither when cancelled.
struct DetailMeasured {
  int resolution = 0;
  double ms = 0;
  std::string error;
};
}  // namespace worker_message

using WorkerMessage =
    std::variant<worker_message::LoadProgress, worker_message::ModelLoaded, worker_message::LoadFailed,
                 worker_message::RunStarted, worker_message::Event, worker_message::Preview,
                 worker_message::PassStarted, worker_message::RunFinished, worker_message::LatencyResult,
                 worker_message::LatencyDemoFinished, worker_message::CandidateReady,
                 worker_message::CandidatesFinished, worker_message::LatencyRunStarted, worker_message::LatencyMeshed,
                 worker_message::Log, worker_message::DetailMeasured>;

// The latency demo's runs, in order: each one faster than the last where it
// exists. A run that this build, machine or model cannot do has a reason and
// is shown as such. After the cache runs come the parallel decodings chosen:
// exact parallel decoding (guessing where it pays, and at every step), or
// block diffusion with each key-value cache, which needs a block-diffusion
// model (which in turn cannot decode token by token, and always ends with
// block diffusion).
//
// Every run decodes with the loaded model's weights, except that beside a
// block-diffusion model the token-by-token runs decode with an autoregressive
// model when one is given (the built-in one in the app), on the same prompt,
// so that block diffusion has ordinary decoding to be compared with. The cache runs keep the
// exact KV cache, which CUDA and parallel decoding need; a smaller KV cache
// chosen in the settings adds a run of its own after the exact one, so the
// two stand side by side.
struct LatencyRun {
  std::string name;      // for the audience
  std::string what;      // one line on what changes
  bool kv_cache = true;
  DecodingOptions decoding;
  std::string unavailable_reason;  // empty: it runs
  bool cuda_graphs = false;        // needs the CUDA backend
  bool chosen_kv_cache = false;    // the KV cache options of the settings, not the exact cache
  int baseline = -1;               // the run it is compared with (its index; -1: none)
  std::string model_folder;        // decodes with this model, not the loaded one (empty: the loaded one)
};
struct LatencyDemoChoice {
  DecodingMode parallel = DecodingMode::kJacobi;  // kSequential: the cache runs alone
  float diffusion_threshold = 0.f;  // 0: the model's (diffusion_options_for_model)
  bool block_diffusion_model = false;
  std::string kv_cache = "f32";  // kv_cache_label of the options chosen; "f32": the exact cache alone
  // Beside a block-diffusion model: an autoregressive model folder for the
  // token-by-token runs (empty: they are not available).
  std::string autoregressive_model;
};
std::vector<LatencyRun> latency_demo_runs(const LatencyDemoChoice& choice = {});

// Whether generations can run on CUDA here: the device, or why not (asked
// once per process; the settings panel shows it).
const CudaAvailability& cuda_backend_availability();

class GenerationWorker {
 public:
  // generation_threads: CPU threads for the model (0: all cores but one, so
  // the UI thread keeps a core).
  explicit GenerationWorker(int generation_threads = 0);
  ~GenerationWorker();  // cancels and joins
  GenerationWorker(const GenerationWorker&) = delete;
  GenerationWorker& operator=(const GenerationWorker&) = delete;

  // Each returns false (and starts nothing) while another job runs or, for
  // generation, when no model is loaded.
  // `weights`: the format the model decodes with (converted as it loads).
  bool load_model(const std::filesystem::path& folder, const WeightOptions& weights = {});
  // Each job plans its request first (inference/planning/plan.h).
  bool generate(const GenerationRequest& request, const PreviewOptions& preview);
  // The runs with the cache that have chosen_kv_cache use the request's KV
  // cache options; the others the exact cache. Each run that
  // can run decodes `repeats` times, in rounds of every run (in order, then
  // backwards, and so on), so that a slow spell of a shared machine falls on
  // every run alike. Only the last run's tokens are meshed, at
  // kLatencyDemoResolution at most; no run's result is a RunFinished.
  bool run_latency_demo(const GenerationRequest& request, std::vector<LatencyRun> runs = latency_demo_runs(),
                        int repeats = kLatencyDemoRepeats);
  // `count` seeds from request.seed on, each sampled (a greedy decode gives
  // every seed the same shape) and meshed at candidate_resolution(), to
  // compare side by side and pick one to refine.
  bool generate_candidates(const GenerationRequest& request, int count);
  // Times one whole generation of `request` (tokens, meshing, cleanup) at its
  // resolution, as the app's first launch does to pick its default detail;
  // nothing goes to the view or the history.
  bool measure_detail_cost(const GenerationRequest& request);
  void cancel();
  // Tests: while held, a job that starts waits before its first step, so a
  // test can cancel it before it runs whatever the machine's load.
  void hold_jobs(bool held);
  // Tests: while held, a generation waits after each preview it sends until
  // it is cancelled (or released), so a test can cancel a run that has shown
  // a preview whatever the machine's speed.
  void hold_after_previews(bool held);

  bool busy() const { return busy_.load(); }
  // Whether `request` can run on the loaded model, as its decoding
  // (request_for_model) and backend choice would run it: the planning's
  // answer (inference/planning/plan.h) without opening anything. Ok without a
  // model. Controls ask it to grey out what cannot run, with the reason.
  Status can_run(const GenerationRequest& request) const;
  // Whether `choice` runs `request` on the loaded model (ok without one).
  Status backend_supports(BackendChoice choice, const GenerationRequest& request) const;
  bool has_model() const;
  std::optional<ModelSummary> model_summary() const;
  std::vector<WorkerMessage> drain() { return messages_.drain(); }
  // Called on the worker's thread after each message it queues, so a UI
  // asleep until something happens wakes to drain it (glfwPostEmptyEvent).
  void set_wake(std::function<void()> wake) { messages_.set_wake(std::move(wake)); }

 private:
  bool start(std::function<void()> job);
  std::shared_ptr<const CubeModel> model() const;
  // The next run's number, its RunStarted sent.
  int announce_run(const CubeModel& model, const GenerationRequest& request, const std::string& label);
  worker_message::RunFinished run_generation(const CubeModel& model, const GenerationRequest& request,
                                             const PreviewOptions& preview, const std::string& label);
  // One latency-demo measurement: the tokens alone, streamed as a run's events.
  // `tokens`: the run's full result, for the demo's one meshing.
  worker_message::LatencyResult measure_latency_run(const CubeModel& model, const GenerationRequest& request,
                                                    const std::string& label, Result<GenerationResult>& tokens);
  // Tokens, then the coarse pass (shown at once), then the requested resolution.
  Result<GenerationResult> mesh_in_passes(const CubeModel& model, const GenerationRequest& request,
                                          const PreviewOptions& preview, int run,
                                          std::chrono::steady_clock::time_point started,
                                          const GenerationEventSink& sink);
  // The request for this model (request_for_model), planned: every option
  // checked, the KV bases read and the backend opened (once per model, kept
  // in plan_cache_), its line logged when it changes.
  Result<GenerationRequest> plan(const CubeModel& model, const GenerationRequest& request);
  // A model other than the loaded one, for the latency demo's runs beside a
  // block-diffusion model: read once per folder, autoregressive, and decoding
  // as many tokens per shape as the loaded one.
  Result<std::shared_ptr<const CubeModel>> autoregressive_model(const std::string& folder, const CubeModel& loaded);

  MessageQueue<WorkerMessage> messages_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> cancel_{false};
  mutable std::mutex model_mutex_;
  std::shared_ptr<const CubeModel> model_;
  std::optional<ModelSummary> summary_;
  int next_run_ = 1;
  // Preview cost estimates; touched only by jobs, which run one after another.
  std::optional<double> preview_estimate_ms_;
  int preview_estimate_resolution_ = 0;
  std::optional<double> coarse_pass_ms_;
  std::map<int, double> final_pass_ms_;  // by resolution, the last measured
  // Backends opened and KV bases read for the loaded model; touched only by jobs.
  PlanCache plan_cache_;
  std::string last_backend_reason_;
  // Autoregressive models read for the latency demo, by folder; touched only by jobs.
  std::map<std::string, std::shared_ptr<const CubeModel>> autoregressive_models_;
  std::mutex hold_mutex_;
  std::condition_variable hold_released_;
  bool jobs_held_ = false;
  bool previews_held_ = false;
  // Waits while previews are held, until released or cancelled.
  void wait_if_previews_held();
  std::jthread job_;  // last member: joined first on destruction
};

}  // namespace cubeforge::app
