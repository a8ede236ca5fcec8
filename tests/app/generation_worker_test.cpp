// The generation worker on the fixture model: loading off the calling thread,
// a generation whose streamed tokens equal a direct generate_shape call,
// progressive previews within their budget bookkeeping, cancellation within
// one token, load errors as messages, and the weights and KV cache options
// each run decodes with.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <variant>

#include "app/desktop/core/generation_worker.h"
#include "inference/decoding/decoding.h"
#include "inference/model/kv_bases.h"
#include "inference/tensor/safetensors.h"
#include "test_folder.h"

namespace cubeforge::app {
namespace {

// Drains until the worker is idle (its last message is queued before it says so).
std::vector<WorkerMessage> wait_for(GenerationWorker& worker) {
  std::vector<WorkerMessage> all;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (worker.busy() && std::chrono::steady_clock::now() < deadline) {
    for (auto& m : worker.drain()) all.push_back(std::move(m));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(worker.busy()) << "the worker did not finish within two minutes";
  for (auto& m : worker.drain()) all.push_back(std::move(m));
  return all;
}

template <class M>
std::vector<M> only(const std::vector<WorkerMessage>& messages) {
  std::vector<M> out;
  for (const auto& m : messages)
    if (const M* found = std::get_if<M>(&m)) out.push_back(*found);
  return out;
}

class WorkerOnFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = testing::oracle_model_folder();
    if (folder_.empty())
      GTEST_SKIP() << "fixture model folder absent (set CUBEFORGE_ORACLE_DIR or place ../shared/oracle/cube3d-v05)";
    ASSERT_TRUE(worker_.load_model(folder_));
    auto messages = wait_for(worker_);
    auto loaded = only<worker_message::ModelLoaded>(messages);
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded[0].summary.shape_tokens, tokens_);
    EXPECT_FALSE(only<worker_message::LoadProgress>(messages).empty());
    ASSERT_TRUE(worker_.has_model());
  }
  GenerationRequest request() const {
    GenerationRequest r;
    r.prompt = ::cubeforge::testing::oracle_facts().prompt;
    r.resolution = 4;
    return r;
  }
  std::filesystem::path folder_;
  const int tokens_ = ::cubeforge::testing::oracle_facts().shape_tokens;
  GenerationWorker worker_{1};
};

// What the app says a block diffusion runs at: the setting when one is made,
// else the model's own threshold, else the engine's default.
TEST(ModelSummary, TheThresholdIsTheSettingsElseTheModelsElseTheDefault) {
  ModelSummary summary;
  summary.gpt.diffusion_block_size = 16;
  EXPECT_EQ(summary.threshold_for(0.f), kDefaultDiffusionThreshold);
  summary.gpt.diffusion_threshold = 0.55f;
  EXPECT_EQ(summary.threshold_for(0.f), 0.55f);
  EXPECT_EQ(summary.threshold_for(0.8f), 0.8f);
}

TEST_F(WorkerOnFixture, StreamsEveryTokenAndMatchesADirectGeneration) {
  PreviewOptions preview;
  preview.enabled = true;
  preview.every_tokens = 4;
  preview.resolution = 4;
  ASSERT_TRUE(worker_.generate(request(), preview));
  EXPECT_FALSE(worker_.generate(request(), preview));  // one job at a time
  auto messages = wait_for(worker_);
  auto finished = only<worker_message::RunFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_TRUE(finished[0].result.ok()) << finished[0].result.error().to_string();

  std::vector<int> streamed(tokens_, -1);
  double last_elapsed = 0;
  for (const auto& e : only<worker_message::Event>(messages)) {
    EXPECT_GE(e.elapsed_ms, last_elapsed);
    last_elapsed = e.elapsed_ms;
    if (e.event.kind == GenerationEvent::Kind::kToken) streamed.at(e.event.token_index) = e.event.token;
  }
  EXPECT_EQ(streamed, finished[0].result->tokens);

  auto model = CubeModel::load(folder_);
  ASSERT_TRUE(model.ok());
  auto direct = generate_shape(*model, request());
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->tokens, finished[0].result->tokens);
  EXPECT_EQ(direct->mesh.face_count(), finished[0].result->mesh.face_count());

  // Due previews every 4 tokens before the last. Nothing has measured a
  // preview's cost yet, so the first one runs and measures it; the budget
  // decides the rest.
  EXPECT_GE(finished[0].preview.previews, 1);
  EXPECT_EQ(finished[0].preview.previews + finished[0].preview.skipped, (tokens_ - 1) / preview.every_tokens);
  // Those with a surface reach the viewport (a random-weight fixture's first
  // tokens may decode to none), in order, from the first due one on.
  auto previews = only<worker_message::Preview>(messages);
  EXPECT_LE(int(previews.size()), finished[0].preview.previews);
  for (const auto& shown : previews) {
    EXPECT_EQ(shown.tokens_known % preview.every_tokens, 0);
    EXPECT_GE(shown.tokens_known, preview.every_tokens);
    EXPECT_FALSE(shown.coarse);
  }
  // At resolution 4 there is no coarser pass to show first.
  for (const auto& pass : only<worker_message::PassStarted>(messages)) EXPECT_TRUE(pass.final_pass);
}

TEST_F(WorkerOnFixture, ACoarseMeshOfAllTokensComesFirstThenTheRequestedResolution) {
  GenerationRequest fine = request();
  fine.resolution = 6;
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(worker_.generate(fine, PreviewOptions{}));
    auto messages = wait_for(worker_);
    auto passes = only<worker_message::PassStarted>(messages);
    ASSERT_EQ(passes.size(), 2u);
    EXPECT_EQ(passes[0].name, "coarse preview");
    EXPECT_EQ(passes[0].resolution, kCoarseResolution);
    EXPECT_FALSE(passes[0].final_pass);
    EXPECT_EQ(passes[1].name, "refining");
    EXPECT_EQ(passes[1].resolution, 6);
    EXPECT_TRUE(passes[1].final_pass);
    // The refining pass has an estimate: scaled from the coarse pass, then measured.
    EXPECT_TRUE(passes[1].estimate_ms.has_value());
    EXPECT_EQ(passes[0].estimate_ms.has_value(), run > 0);
    auto previews = only<worker_message::Preview>(messages);
    ASSERT_EQ(previews.size(), 1u);
    EXPECT_TRUE(previews[0].coarse);
    EXPECT_EQ(previews[0].tokens_known, tokens_);
    // The fixture records whether the prompt's tokens decode to a surface.
    if (::cubeforge::testing::oracle_facts().decoded_field_has_surface) EXPECT_GT(previews[0].mesh.face_count(), 0u);
    auto finished = only<worker_message::RunFinished>(messages);
    ASSERT_EQ(finished.size(), 1u);
    ASSERT_TRUE(finished[0].result.ok());
    // The coarse mesh is coarser than the final one, and came before it.
    EXPECT_LT(previews[0].mesh.face_count(), finished[0].result->mesh.face_count());
    EXPECT_LT(previews[0].elapsed_ms, finished[0].wall_ms);
  }
}

TEST_F(WorkerOnFixture, ProgressivePreviewsPadTheTokensAndKeepToTheirBudget) {
  PreviewOptions measure;
  measure.enabled = true;
  measure.every_tokens = 4;
  ASSERT_TRUE(worker_.generate(request(), measure));  // measures a preview's cost
  wait_for(worker_);

  PreviewOptions unlimited;
  unlimited.enabled = true;
  unlimited.every_tokens = 4;
  unlimited.max_decode_overhead = 1e9;
  ASSERT_TRUE(worker_.generate(request(), unlimited));
  auto messages = wait_for(worker_);
  // Every due preview runs; those with a surface reach the viewport (an empty
  // one would blank it), in order of the tokens they saw.
  const int due = (tokens_ - 1) / unlimited.every_tokens;
  auto previews = only<worker_message::Preview>(messages);
  ASSERT_LE(int(previews.size()), due);
  int last_known = 0;
  for (const auto& preview : previews) {
    EXPECT_EQ(preview.tokens_known % 4, 0);
    EXPECT_GT(preview.tokens_known, last_known);
    last_known = preview.tokens_known;
    EXPECT_GT(preview.decode_ms, 0.0);
    EXPECT_GT(preview.mesh.face_count(), 0u);
  }
  auto finished = only<worker_message::RunFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_TRUE(finished[0].result.ok());
  EXPECT_EQ(finished[0].preview.previews, due);
  EXPECT_GT(finished[0].preview.decode_ms, finished[0].preview.preview_ms);  // previews run inside decode

  // With the default budget (half the decode time) the previews' share stays
  // near it; the slack covers a preview that costs more than the last one measured.
  PreviewOptions budgeted;
  budgeted.enabled = true;
  budgeted.every_tokens = 4;
  ASSERT_TRUE(worker_.generate(request(), budgeted));
  auto budgeted_run = only<worker_message::RunFinished>(wait_for(worker_));
  ASSERT_EQ(budgeted_run.size(), 1u);
  const PreviewCost& cost = budgeted_run[0].preview;
  EXPECT_EQ(cost.previews + cost.skipped, due);
  EXPECT_LE(cost.overhead(), 0.75) << cost.previews << " previews took " << cost.preview_ms << " ms of "
                                   << cost.decode_ms << " ms decode";
}

// Held after a preview (the app's scripts cancel a run with a preview on
// screen this way), the run waits for the cancel however fast the machine,
// and stops at once when it comes.
TEST_F(WorkerOnFixture, HeldAfterAPreviewARunWaitsForTheCancel) {
  worker_.hold_after_previews(true);
  PreviewOptions every;
  every.enabled = true;
  every.every_tokens = 1;
  every.max_decode_overhead = 1e9;
  ASSERT_TRUE(worker_.generate(request(), every));
  std::vector<WorkerMessage> messages;
  bool previewed = false;
  while (!previewed && worker_.busy()) {
    for (WorkerMessage& m : worker_.drain()) {
      previewed |= std::holds_alternative<worker_message::Preview>(m);
      messages.push_back(std::move(m));
    }
    if (!previewed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(previewed) << "the run ended without a preview (none of this fixture's had a surface)";
  EXPECT_TRUE(worker_.busy()) << "the run went on after its preview";
  const int known = only<worker_message::Preview>(messages).back().tokens_known;
  worker_.cancel();
  for (WorkerMessage& m : wait_for(worker_)) messages.push_back(std::move(m));
  auto finished = only<worker_message::RunFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_FALSE(finished[0].result.ok());
  EXPECT_EQ(finished[0].result.error().code, ErrorCode::kCancelled);
  int tokens = 0;
  for (const auto& e : only<worker_message::Event>(messages)) tokens += e.event.kind == GenerationEvent::Kind::kToken;
  EXPECT_LE(tokens, known + 1) << "tokens decoded after the held preview";
  worker_.hold_after_previews(false);
}

// Held at its start, the job cannot run ahead of the cancel on a loaded
// machine (it once decoded 22 tokens before the test thread got to cancel).
TEST_F(WorkerOnFixture, CancelStopsWithinOneToken) {
  worker_.hold_jobs(true);
  ASSERT_TRUE(worker_.generate(request(), PreviewOptions{}));
  worker_.cancel();
  worker_.hold_jobs(false);
  auto messages = wait_for(worker_);
  auto finished = only<worker_message::RunFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_FALSE(finished[0].result.ok());
  EXPECT_EQ(finished[0].result.error().code, ErrorCode::kCancelled);
  int tokens = 0;
  for (const auto& e : only<worker_message::Event>(messages)) tokens += e.event.kind == GenerationEvent::Kind::kToken;
  EXPECT_LE(tokens, 1);
  // The worker takes the next job.
  ASSERT_TRUE(worker_.generate(request(), PreviewOptions{}));
  auto again = only<worker_message::RunFinished>(wait_for(worker_));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].result.ok());
}

// The demo compares decodings of one token sequence: with sampling switched on
// in the settings (a candidate's settings taken) it still decodes greedily, so
// exact parallel decoding, which reproduces greedy decoding, runs.
TEST_F(WorkerOnFixture, LatencyDemoIsGreedyWhateverTheSettings) {
  GenerationRequest sampled = request();
  sampled.sampling.greedy = false;
  sampled.sampling.top_p = 0.9f;
  const auto runs = latency_demo_runs(LatencyDemoChoice{DecodingMode::kJacobi});
  ASSERT_TRUE(worker_.run_latency_demo(sampled, runs, 1));
  const auto bars = only<worker_message::LatencyResult>(wait_for(worker_));
  int parallel_runs = 0;
  for (const auto& bar : bars) {
    if (runs[size_t(bar.index)].decoding.mode != DecodingMode::kJacobi) continue;
    ++parallel_runs;
    EXPECT_TRUE(bar.available) << bar.label << ": " << bar.unavailable_reason;
  }
  EXPECT_GT(parallel_runs, 0);
}

// The demo measures every run kLatencyDemoRepeats times, in rounds that take
// turns (forwards, then backwards), so that a slow spell of a shared machine
// falls on every run alike; it meshes once, the last run's tokens, coarser
// than the request asks; and no run is a RunFinished, which the app would
// keep in its history and put in the view.
TEST_F(WorkerOnFixture, LatencyDemoRepeatsEachRunInTurnsAndMeshesOnce) {
  GenerationRequest asked = request();
  asked.resolution = kLatencyDemoResolution + 2;
  ASSERT_TRUE(worker_.run_latency_demo(asked));
  auto messages = wait_for(worker_);
  auto bars = only<worker_message::LatencyResult>(messages);
  const auto runs_listed = latency_demo_runs();
  // The runs this build cannot do say why, once, and are not run.
  std::vector<int> runnable;
  for (const auto& bar : bars) {
    if (bar.available) continue;
    EXPECT_EQ(bar.repeat, 0) << bar.label;
    EXPECT_FALSE(bar.unavailable_reason.empty()) << bar.label;
  }
  for (size_t i = 0; i < runs_listed.size(); ++i) {
    const bool measured = std::any_of(bars.begin(), bars.end(), [&](const auto& b) { return b.index == int(i) && b.available; });
    if (!runs_listed[i].unavailable_reason.empty()) EXPECT_FALSE(measured) << runs_listed[i].name;
    if (measured) runnable.push_back(int(i));
  }
  ASSERT_GE(runnable.size(), 2u);
  EXPECT_EQ(runnable[0], 0);
  EXPECT_EQ(runnable[1], 1);
  std::vector<std::pair<int, int>> expected, started, measured;
  for (int round = 0; round < kLatencyDemoRepeats; ++round) {
    std::vector<int> order = runnable;
    if (round % 2) std::reverse(order.begin(), order.end());
    for (int index : order) expected.push_back({index, round});
  }
  for (const auto& m : only<worker_message::LatencyRunStarted>(messages)) started.push_back({m.index, m.repeat});
  for (const auto& bar : bars)
    if (bar.available) measured.push_back({bar.index, bar.repeat});
  EXPECT_EQ(started, expected);
  EXPECT_EQ(measured, expected);
  EXPECT_TRUE(only<worker_message::RunFinished>(messages).empty()) << "a demo run would go to the history";
  EXPECT_TRUE(only<worker_message::Preview>(messages).empty());

  // Each measurement: the tokens alone, the stages adding up to at most its time.
  // Causal attention: the cache changes the cost, not the tokens; nor does
  // exact parallel decoding, which the demo ends with by default.
  const auto& reference = *std::find_if(bars.begin(), bars.end(), [](const auto& b) { return b.index == 1; });
  int parallel = 0;
  for (const auto& bar : bars) {
    if (!bar.available) continue;
    EXPECT_GT(bar.mean_tpot_ms, 0.0) << bar.label;
    EXPECT_EQ(bar.stages.occupancy_ms, 0.0) << bar.label << " was meshed";
    EXPECT_EQ(bar.stages.meshing_ms, 0.0) << bar.label << " was meshed";
    EXPECT_LE(bar.stages.total_ms(), bar.total_ms + 1.0) << bar.label;
    EXPECT_EQ(bar.tokens, reference.tokens) << bar.label;
    EXPECT_EQ(bar.kv_cache, bar.index == 0 ? "none" : "f32") << bar.label;
    parallel += bar.decoding.mode == DecodingMode::kJacobi;
    // The grid: the evaluation that chose each token, from the token events,
    // agrees with the strategy's own count of tokens per evaluation.
    ASSERT_EQ(bar.token_steps.size(), reference.tokens.size()) << bar.label;
    std::vector<int> per_step(size_t(bar.decoding.model_evaluations), 0);
    for (int step : bar.token_steps) {
      ASSERT_TRUE(step >= 0 && step < bar.decoding.model_evaluations) << bar.label << " step " << step;
      ++per_step[size_t(step)];
    }
    EXPECT_EQ(per_step, bar.decoding.tokens_per_step) << bar.label;
    EXPECT_TRUE(std::is_sorted(bar.token_steps.begin(), bar.token_steps.end())) << bar.label;
  }
  EXPECT_EQ(parallel, 2 * kLatencyDemoRepeats);

  auto meshed = only<worker_message::LatencyMeshed>(messages);
  ASSERT_EQ(meshed.size(), 1u);
  EXPECT_EQ(meshed[0].index, expected.back().first) << "the last run's tokens";
  EXPECT_EQ(meshed[0].resolution, kLatencyDemoResolution);
  EXPECT_TRUE(meshed[0].problem.empty()) << meshed[0].problem;
  auto finished = only<worker_message::LatencyDemoFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_FALSE(finished[0].cancelled);
  double measured_ms = meshed[0].ms;
  for (const auto& bar : bars) measured_ms += bar.total_ms;
  EXPECT_GE(finished[0].wall_ms, measured_ms) << "the demo's time holds every measurement";
}

// A low resolution is kept: the demo meshes no finer than the request asks.
TEST_F(WorkerOnFixture, LatencyDemoMeshesNoFinerThanAsked) {
  GenerationRequest asked = request();
  asked.resolution = 3;
  ASSERT_TRUE(worker_.run_latency_demo(asked, latency_demo_runs(LatencyDemoChoice{DecodingMode::kSequential}), 1));
  auto messages = wait_for(worker_);
  auto meshed = only<worker_message::LatencyMeshed>(messages);
  ASSERT_EQ(meshed.size(), 1u);
  EXPECT_EQ(meshed[0].resolution, 3);
  EXPECT_EQ(meshed[0].index, 1) << "one round: the last run is the cache's";
  EXPECT_EQ(only<worker_message::LatencyRunStarted>(messages).size(), 2u) << "one round of the two cache runs";
}

// Converted weights and a smaller KV cache: the worker loads the model in the
// format asked for, every run says what it decoded with, and its tokens are
// those of a direct generation with the same options (whether or not they
// differ from the exact ones is the engine's business, not this test's).
TEST(GenerationWorker, RunsWithTheWeightsAndKvCacheChosenAndSaysSo) {
  const auto folder = testing::oracle_model_folder();
  if (folder.empty()) GTEST_SKIP() << "fixture model folder absent";
  GenerationWorker worker(1);
  ASSERT_TRUE(worker.load_model(folder, WeightOptions{WeightFormat::kQ8}));
  auto loaded = only<worker_message::ModelLoaded>(wait_for(worker));
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].summary.weights, WeightFormat::kQ8);
  EXPECT_EQ(loaded[0].summary.kv_bases_rank, 0) << "the fixture has no KV bases";

  GenerationRequest request;
  request.prompt = "a red dragon";
  request.resolution = 4;
  request.kv_cache.format = KvFormat::kInt8;
  ASSERT_TRUE(worker.generate(request, PreviewOptions{}));
  auto messages = wait_for(worker);
  auto started = only<worker_message::RunStarted>(messages);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].weights, "q8");
  EXPECT_EQ(started[0].kv_cache, "int8");
  auto finished = only<worker_message::RunFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_TRUE(finished[0].result.ok()) << finished[0].result.error().to_string();
  EXPECT_EQ(finished[0].weights, WeightFormat::kQ8);
  EXPECT_EQ(kv_cache_label(finished[0].request), "int8");

  auto direct_model = CubeModel::load(folder, {}, WeightOptions{WeightFormat::kQ8});
  ASSERT_TRUE(direct_model.ok());
  auto direct = generate_shape(*direct_model, request);
  ASSERT_TRUE(direct.ok()) << direct.error().to_string();
  EXPECT_EQ(finished[0].result->tokens, direct->tokens);

  // A rank without bases in the folder: the engine's error, naming the command that makes them.
  GenerationRequest ranked = request;
  ranked.kv_cache.rank = 4;
  ASSERT_TRUE(worker.generate(ranked, PreviewOptions{}));
  auto refused = only<worker_message::RunFinished>(wait_for(worker));
  ASSERT_EQ(refused.size(), 1u);
  ASSERT_FALSE(refused[0].result.ok());
  EXPECT_NE(refused[0].result.error().message.find("calibrate-kv"), std::string::npos)
      << refused[0].result.error().message;
  // Options the engine refuses together are its error, not a crash.
  GenerationRequest evicting_int8 = request;
  evicting_int8.kv_cache.budget = 8;
  ASSERT_TRUE(worker.generate(evicting_int8, PreviewOptions{}));
  refused = only<worker_message::RunFinished>(wait_for(worker));
  ASSERT_EQ(refused.size(), 1u);
  ASSERT_FALSE(refused[0].result.ok());
  EXPECT_NE(refused[0].result.error().message.find("INT8"), std::string::npos) << refused[0].result.error().message;
}

// Bases beside the model (the first rows of the identity: orthonormal, so
// valid whatever a calibration would find): the worker offers their rank,
// reads the rank asked for, and decodes as a direct generation with them does.
TEST(GenerationWorker, ReadsTheKvRankBasesFromTheModelFolder) {
  const auto fixture = testing::oracle_model_folder();
  if (fixture.empty()) GTEST_SKIP() << "fixture model folder absent";
  testing::TemporaryFolder temporary;
  const auto folder = temporary.path() / "model";
  std::filesystem::create_directory(folder);
  for (const char* part : {"shape_gpt.safetensors", "shape_tokenizer.safetensors", "config.yaml", "clip"})
    std::filesystem::create_symlink(fixture / part, folder / part);
  auto model = CubeModel::load(folder);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const GptConfig& config = model->config().gpt;
  const int64_t max_rank = 6, width = config.width;
  std::vector<float> identity(size_t(max_rank * width), 0.f);
  for (int64_t i = 0; i < max_rank; ++i) identity[size_t(i * width + i)] = 1.f;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(identity.data()),
                                         identity.size() * sizeof(float));
  std::vector<TensorToWrite> tensors;
  for (int l = 0; l < config.dual_layers + config.single_layers; ++l)
    for (const char* kind : {"keys", "values"})
      tensors.push_back({"layers." + std::to_string(l) + "." + kind, DType::kF32, {max_rank, width}, bytes});
  ASSERT_TRUE(write_safetensors(folder / kKvBasesFile, tensors).ok());

  GenerationWorker worker(1);
  ASSERT_TRUE(worker.load_model(folder));
  auto loaded = only<worker_message::ModelLoaded>(wait_for(worker));
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].summary.kv_bases_rank, max_rank);
  EXPECT_EQ(loaded[0].summary.kv_bases_problem, "");

  GenerationRequest request;
  request.prompt = "a red dragon";
  request.resolution = 4;
  request.kv_cache.format = KvFormat::kBF16;
  request.kv_cache.rank = 4;
  ASSERT_TRUE(worker.generate(request, PreviewOptions{}));
  auto messages = wait_for(worker);
  auto started = only<worker_message::RunStarted>(messages);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].kv_cache, "bf16, rank 4");
  auto finished = only<worker_message::RunFinished>(messages);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_TRUE(finished[0].result.ok()) << finished[0].result.error().to_string();
  ASSERT_NE(finished[0].request.kv_cache.low_rank, nullptr);
  EXPECT_EQ(finished[0].request.kv_cache.low_rank->rank(), 4);

  auto bases = LowRankKv::load(folder / kKvBasesFile, config, 4);
  ASSERT_TRUE(bases.ok()) << bases.error().to_string();
  GenerationRequest direct_request = request;
  direct_request.kv_cache.low_rank = *bases;
  auto direct = generate_shape(*model, direct_request);
  ASSERT_TRUE(direct.ok()) << direct.error().to_string();
  EXPECT_EQ(finished[0].result->tokens, direct->tokens);

  // More than the bases hold: the engine's error.
  request.kv_cache.rank = int(max_rank) + 1;
  ASSERT_TRUE(worker.generate(request, PreviewOptions{}));
  auto refused = only<worker_message::RunFinished>(wait_for(worker));
  ASSERT_EQ(refused.size(), 1u);
  ASSERT_FALSE(refused[0].result.ok());
  EXPECT_NE(refused[0].result.error().message.find("recalibrate"), std::string::npos)
      << refused[0].result.error().message;
}

// A smaller KV cache chosen: the demo runs it beside the exact cache, each
// run saying what it decoded with; the runs that need the exact cache keep it.
TEST_F(WorkerOnFixture, LatencyDemoRunsTheChosenKvCacheBesideTheExactOne) {
  LatencyDemoChoice choice;
  choice.kv_cache = "fp8, budget 8";
  const auto runs_listed = latency_demo_runs(choice);
  ASSERT_GE(runs_listed.size(), 4u);
  EXPECT_EQ(runs_listed[2].name, "Smaller KV cache");
  EXPECT_NE(runs_listed[2].what.find("fp8, budget 8"), std::string::npos) << runs_listed[2].what;
  EXPECT_TRUE(runs_listed[2].chosen_kv_cache);
  for (size_t i = 0; i < runs_listed.size(); ++i) EXPECT_EQ(runs_listed[i].chosen_kv_cache, i == 2);
  GenerationRequest chosen = request();
  chosen.kv_cache.format = KvFormat::kFp8;
  chosen.kv_cache.budget = 8;
  ASSERT_TRUE(worker_.run_latency_demo(chosen, runs_listed));
  auto messages = wait_for(worker_);
  // Each run's first measurement (or why it did not run), by run.
  std::vector<worker_message::LatencyResult> bars;
  for (const auto& bar : only<worker_message::LatencyResult>(messages))
    if (bar.repeat == 0) bars.push_back(bar);
  std::sort(bars.begin(), bars.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  ASSERT_EQ(bars.size(), runs_listed.size());
  EXPECT_EQ(bars[0].kv_cache, "none");
  EXPECT_EQ(bars[1].kv_cache, "f32");
  EXPECT_EQ(bars[2].kv_cache, "fp8, budget 8");
  for (const auto& bar : bars) {
    if (!bar.available) continue;
    EXPECT_EQ(bar.weights, "stored") << bar.label;
    if (bar.index > 2) {
      EXPECT_EQ(bar.kv_cache, "f32") << bar.label << " needs the exact cache";
    }
  }
  ASSERT_TRUE(bars[2].available) << bars[2].unavailable_reason;
  // The chosen run's tokens are a direct generation's with the same cache.
  auto model = CubeModel::load(folder_);
  ASSERT_TRUE(model.ok());
  auto direct = generate_shape(*model, chosen);
  ASSERT_TRUE(direct.ok()) << direct.error().to_string();
  EXPECT_EQ(bars[2].tokens, direct->tokens);
}

// The demo's runs follow the decoding chosen and the model: block diffusion
// needs a block-diffusion model, which cannot run the token-by-token ones.
TEST(LatencyDemoRuns, FollowTheChoiceAndTheModel) {
  LatencyDemoChoice choice;
  choice.parallel = DecodingMode::kSequential;
  EXPECT_EQ(latency_demo_runs(choice).size(), 3u);
  choice.parallel = DecodingMode::kDiffusion;
  choice.diffusion_threshold = 0.8f;
  auto runs = latency_demo_runs(choice);
  ASSERT_EQ(runs.size(), 6u);
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_EQ(runs[i].decoding.mode, DecodingMode::kDiffusion);
    EXPECT_EQ(runs[i].decoding.diffusion.threshold, 0.8f);
    EXPECT_NE(runs[i].unavailable_reason.find("block-diffusion model"), std::string::npos);
  }
  EXPECT_EQ(runs[3].decoding.diffusion.cache, DiffusionCache::kNone);
  EXPECT_EQ(runs[5].decoding.diffusion.cache, DiffusionCache::kDual);
  choice.block_diffusion_model = true;
  runs = latency_demo_runs(choice);
  EXPECT_FALSE(runs[0].unavailable_reason.empty());
  EXPECT_FALSE(runs[1].unavailable_reason.empty());
  for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(runs[i].unavailable_reason.empty()) << runs[i].name;
  // Whatever was chosen, a block-diffusion model ends with block diffusion.
  choice.parallel = DecodingMode::kJacobi;
  const auto by_blocks = latency_demo_runs(choice);
  ASSERT_EQ(by_blocks.size(), 6u);
  for (size_t i = 3; i < 6; ++i) EXPECT_EQ(by_blocks[i].decoding.mode, DecodingMode::kDiffusion);
}

// What each run is compared with: the cache with no cache, everything after
// it with the cache (the decoding it would replace); on a block-diffusion
// model, which has no token-by-token run, the block caches with none.
TEST(LatencyDemoRuns, EachRunIsComparedWithTheDecodingItReplaces) {
  LatencyDemoChoice choice;
  choice.kv_cache = "int8";
  const auto jacobi = latency_demo_runs(choice);
  ASSERT_EQ(jacobi.size(), 6u);
  EXPECT_EQ(jacobi[0].baseline, -1);
  EXPECT_EQ(jacobi[1].baseline, 0);
  for (size_t i = 2; i < jacobi.size(); ++i) EXPECT_EQ(jacobi[i].baseline, 1) << jacobi[i].name;
  choice.block_diffusion_model = true;
  const auto by_blocks = latency_demo_runs(choice);
  ASSERT_EQ(by_blocks.size(), 7u);
  EXPECT_EQ(by_blocks[4].name, "Block diffusion, no cache");
  EXPECT_EQ(by_blocks[4].baseline, -1);
  EXPECT_EQ(by_blocks[5].baseline, 4);
  EXPECT_EQ(by_blocks[6].baseline, 4);
  for (const auto& run : by_blocks) EXPECT_TRUE(run.model_folder.empty()) << run.name;
}

// Beside a block-diffusion model with an autoregressive one given, the
// token-by-token runs decode with that one, and block diffusion is compared
// with its KV cache run: the two models side by side on one prompt.
TEST(LatencyDemoRuns, BesideABlockDiffusionModelTheTokenByTokenRunsUseTheAutoregressiveOne) {
  LatencyDemoChoice choice;
  choice.block_diffusion_model = true;
  choice.autoregressive_model = "/models/autoregressive";
  const auto runs = latency_demo_runs(choice);
  ASSERT_EQ(runs.size(), 6u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(runs[i].model_folder, "/models/autoregressive") << runs[i].name;
    EXPECT_NE(runs[i].what.find("/models/autoregressive"), std::string::npos) << runs[i].what;
  }
  EXPECT_TRUE(runs[0].unavailable_reason.empty()) << runs[0].unavailable_reason;
  EXPECT_TRUE(runs[1].unavailable_reason.empty()) << runs[1].unavailable_reason;
  EXPECT_FALSE(runs[2].unavailable_reason.empty()) << "CUDA graphs: the other model decodes on the CPU";
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_TRUE(runs[i].model_folder.empty()) << runs[i].name;
    EXPECT_EQ(runs[i].decoding.mode, DecodingMode::kDiffusion);
    EXPECT_TRUE(runs[i].unavailable_reason.empty()) << runs[i].name;
    EXPECT_EQ(runs[i].baseline, 1) << runs[i].name;
  }
}

// The same on the fixture: its GPT read as a block-diffusion model loaded,
// the fixture itself beside it. The cache runs decode the autoregressive
// model's tokens (as a direct generation with it), the block-diffusion runs
// the loaded model's; a model of another token count is refused by name.
TEST(GenerationWorker, LatencyDemoDecodesTokenByTokenWithTheAutoregressiveModelBesideABlockDiffusionOne) {
  const auto autoregressive = testing::oracle_model_folder();
  if (autoregressive.empty()) GTEST_SKIP() << "fixture model folder absent";
  testing::TemporaryFolder folder;
  const auto by_blocks = folder.path() / "model";
  ASSERT_TRUE(::cubeforge::testing::make_oracle_block_diffusion_model(by_blocks));
  GenerationWorker worker(1);
  ASSERT_TRUE(worker.load_model(by_blocks));
  ASSERT_EQ(only<worker_message::ModelLoaded>(wait_for(worker)).size(), 1u);
  LatencyDemoChoice choice;
  choice.block_diffusion_model = true;
  choice.autoregressive_model = autoregressive.string();
  const auto runs = latency_demo_runs(choice);
  GenerationRequest request;
  request.prompt = ::cubeforge::testing::oracle_facts().prompt;
  request.resolution = 3;
  ASSERT_TRUE(worker.run_latency_demo(request, runs, 1));
  auto bars = only<worker_message::LatencyResult>(wait_for(worker));
  auto find = [&](int index) {
    return std::find_if(bars.begin(), bars.end(), [&](const auto& b) { return b.index == index; });
  };
  ASSERT_NE(find(1), bars.end());
  EXPECT_TRUE(find(0)->available) << find(0)->unavailable_reason;
  ASSERT_TRUE(find(1)->available) << find(1)->unavailable_reason;
  EXPECT_EQ(find(1)->model, autoregressive.string());
  EXPECT_EQ(find(1)->decoding.mode, DecodingMode::kSequential);
  auto model = CubeModel::load(autoregressive);
  ASSERT_TRUE(model.ok());
  auto direct = generate_shape_tokens(*model, request);
  ASSERT_TRUE(direct.ok()) << direct.error().to_string();
  EXPECT_EQ(find(1)->tokens, direct->tokens);
  for (int i = 3; i < 6; ++i) {
    ASSERT_NE(find(i), bars.end());
    ASSERT_TRUE(find(i)->available) << find(i)->label << ": " << find(i)->unavailable_reason;
    EXPECT_EQ(find(i)->model, by_blocks.string()) << find(i)->label;
    EXPECT_EQ(find(i)->decoding.mode, DecodingMode::kDiffusion) << find(i)->label;
  }
  // A model of another token count beside it: refused, saying why.
  const std::filesystem::path builtin = CUBEFORGE_BUILTIN_MODEL_DIR;
  if (!std::filesystem::exists(builtin / "shape_gpt.safetensors")) return;
  choice.autoregressive_model = builtin.string();
  ASSERT_TRUE(worker.run_latency_demo(request, latency_demo_runs(choice), 1));
  bars = only<worker_message::LatencyResult>(wait_for(worker));
  ASSERT_NE(find(1), bars.end());
  EXPECT_FALSE(find(1)->available);
  EXPECT_NE(find(1)->unavailable_reason.find("tokens per shape"), std::string::npos) << find(1)->unavailable_reason;
  EXPECT_TRUE(find(3)->available) << find(3)->unavailable_reason;
}

TEST(GenerationWorker, LoadingReportsProgressAndCanBeCancelled) {
  const auto folder = testing::oracle_model_folder();
  if (folder.empty()) GTEST_SKIP() << "fixture model folder absent";
  GenerationWorker worker(1);
  worker.hold_jobs(true);  // the load cannot finish before the cancel, however loaded the machine
  ASSERT_TRUE(worker.load_model(folder));
  worker.cancel();  // seen at the next progress step
  worker.hold_jobs(false);
  auto messages = wait_for(worker);
  auto failed = only<worker_message::LoadFailed>(messages);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].error.code, ErrorCode::kCancelled);
  EXPECT_TRUE(only<worker_message::ModelLoaded>(messages).empty());
  EXPECT_FALSE(worker.has_model());
  // A later load of the same folder goes through.
  ASSERT_TRUE(worker.load_model(folder));
  EXPECT_EQ(only<worker_message::ModelLoaded>(wait_for(worker)).size(), 1u);
  EXPECT_TRUE(worker.has_model());
}

TEST(GenerationWorker, BadModelFolderIsAMessageNotACrash) {
  GenerationWorker worker(1);
  EXPECT_FALSE(worker.generate(GenerationRequest{}, PreviewOptions{}));  // no model yet
  ASSERT_TRUE(worker.load_model("/nonexistent/cubeforge-model"));
  auto failed = only<worker_message::LoadFailed>(wait_for(worker));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].error.code, ErrorCode::kCancelled);
  EXPECT_NE(failed[0].error.message.find("cubeforge-model"), std::string::npos);
  EXPECT_FALSE(worker.has_model());
}

}  // namespace
}  // namespace cubeforge::app
