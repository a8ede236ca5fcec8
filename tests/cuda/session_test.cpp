// The CUDA token backend end to end against the CPU backend: on the reference
// fixture (every case, with and without guidance) in both attention modes and
// every mode of the ablation (no KV cache, KV cache eager, KV cache + graph),
// greedy tokens must equal the CPU backend's (and the reference's) and every
// step's logits must agree within 1e-5 (f32 cache); teacher-forced logits the
// same; on the built-in model the recorded prompts give the CPU's tokens.
// Nothing here assumes the fixture's sizes: they come from its files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <utility>

#include "cuda_test_support.h"
#include "inference/backend/generate.h"
#include "inference/core/file_io.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/cpu_backend/gpt_kv_cache.h"
#include "inference/cpu_backend/kv_calibration.h"
#include "inference/cuda/decode_graph.h"
#include "inference/cuda_backend/token_backend.h"
#include "inference/decoding/decoding.h"
#include "inference/model/random_weights.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"
#include "inference/planning/select_backend.h"
#include "tests/support/oracle.h"
#include "tests/support/oracle_gpt.h"
#include "tests/support/orthonormal_rows.h"
#include "tests/support/small_gpt.h"

namespace cubeforge::cuda::testing {
namespace {

using cubeforge::testing::kOracleTolerance;
using cubeforge::testing::oracle_dir;
using cubeforge::testing::relative_error;

// CPU and GPU both compute in f32 with an f32 cache; only summation orders differ.
constexpr double kBackendTolerance = 1e-5;
// How far a stored KV cache's logits may differ between the backends, as a
// share of how far the format moves them from the exact cache's: a value on
// a rounding boundary may be stored one code apart, and one such code can
// move the logits by a visible share of the format's whole effect.
constexpr double kStoredCodeShare = 0.25;

struct Mode {
  const char* name;
  AttentionMode attention;
  bool kv_cache;
  bool graphs;
};
constexpr Mode kModes[] = {{"causal, KV cache + graph", AttentionMode::kCausal, true, true},
                           {"causal, KV cache eager", AttentionMode::kCausal, true, false},
                           {"causal, no KV cache", AttentionMode::kCausal, false, false},
                           {"reference KV quirk, KV cache + graph", AttentionMode::kReference, true, true}};

class CudaSessionOracle : public CudaTest, protected cubeforge::testing::OracleGpt {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    CUBEFORGE_REQUIRE_ORACLE();
    ASSERT_NO_FATAL_FAILURE(load_oracle_gpt());
    auto selected = select_token_backend(BackendChoice::kCuda, *model_);
    ASSERT_TRUE(selected.ok()) << selected.error().to_string();
    ASSERT_EQ(selected->backend->kind(), BackendKind::kCuda);
    cuda_ = selected->backend;
    cpu_ = make_cpu_token_backend(*model_);
  }

  // The condition of a case: cond and (with guidance) uncond rows [S, d].
  struct Condition {
    std::vector<float> cond, uncond;
    float guidance = 0.0f;
  };
  Condition condition(const std::string& name) {
    Condition c;
    auto view = expected_.get(name + ".cond");
    EXPECT_TRUE(view.ok());
    const bool guided = view->shape()[0] == 2;
    std::vector<float> bbox;
    if (name == "cfg_bbox") bbox = tensor("bbox");
    auto cond = model_->project_condition(tensor("text_embed"), bbox.empty() ? nullptr : bbox.data());
    EXPECT_TRUE(cond.ok());
    c.cond = *cond;
    if (guided) {
      auto uncond = model_->project_condition(tensor("uncond_text_embed"), nullptr);
      EXPECT_TRUE(uncond.ok());
      c.uncond = *uncond;
      c.guidance = 3.0f;
    }
    return c;
  }

  struct Run {
    std::vector<int> tokens;
    TokenTrace trace;
  };
  Run run(const TokenBackend& backend, const Condition& c, int tokens, const TokenGenerationOptions& options,
          std::span<const int> forced = {}) {
    Run result;
    auto generated = generate_tokens(backend, c.cond, c.uncond, tokens, options, {}, &result.trace, forced);
    EXPECT_TRUE(generated.ok()) << generated.error().to_string();
    if (generated.ok()) result.tokens = *generated;
    return result;
  }

  std::shared_ptr<TokenBackend> cuda_, cpu_;
};

// One reference case (cfg_bbox, cfg, nocfg) in one mode per test: they run in parallel.
class CudaSessionModes : public CudaSessionOracle,
                         public ::testing::WithParamInterface<std::tuple<const char*, int>> {
 protected:
  void SetUp() override {
    CudaSessionOracle::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    name_ = std::get<0>(GetParam());
    if (!expected_.contains(name_ + ".cond")) GTEST_SKIP() << "the fixture has no case " << name_;
  }
  std::string name_;
};

TEST_P(CudaSessionModes, GreedyTokensAndLogitsEqualTheCpuBackend) {
  const Mode& mode = kModes[std::get<1>(GetParam())];
  const Condition c = condition(name_);
  const int tokens = int(ids(name_ + ".causal.tokens").size());
  ASSERT_GT(tokens, 0);
  TokenGenerationOptions options;
  options.guidance_scale = c.guidance;
  options.attention = mode.attention;
  options.use_kv_cache = mode.kv_cache;
  options.cuda_graphs = mode.graphs;
  const Run cpu = run(*cpu_, c, tokens, options);
  const Run gpu = run(*cuda_, c, tokens, options);
  EXPECT_EQ(gpu.tokens, cpu.tokens);
  if (mode.kv_cache || mode.attention == AttentionMode::kCausal) {
    const char* fixture = mode.attention == AttentionMode::kCausal ? ".causal" : ".refkv";
    EXPECT_EQ(gpu.tokens, ids(name_ + fixture + ".tokens")) << "against the reference";
  }
  EXPECT_LT(relative_error(gpu.trace.raw_logits, cpu.trace.raw_logits), kBackendTolerance);
  EXPECT_LT(relative_error(gpu.trace.combined_logits, cpu.trace.combined_logits), kBackendTolerance);
}

std::string case_and_mode(const ::testing::TestParamInfo<std::tuple<const char*, int>>& info) {
  static const char* const modes[] = {"causal_graph", "causal_eager", "causal_no_cache", "reference_graph"};
  return std::string(std::get<0>(info.param)) + "_" + modes[std::get<1>(info.param)];
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<const char*, int>>& info) {
  return std::get<0>(info.param);
}

INSTANTIATE_TEST_SUITE_P(EveryCaseAndMode, CudaSessionModes,
                         ::testing::Combine(::testing::Values("cfg_bbox", "cfg", "nocfg"), ::testing::Range(0, 4)),
                         case_and_mode);

class CudaSessionForcing : public CudaSessionModes {};

TEST_P(CudaSessionForcing, TeacherForcedLogitsEqualTheCpuBackend) {
  const Condition c = condition(name_);
  const int tokens = int(ids(name_ + ".causal.tokens").size());
  // Tokens the model would not choose, so every fed embedding comes from the forced list.
  std::mt19937 generator(7);
  std::vector<int> forced(static_cast<size_t>(tokens));
  for (int& token : forced) token = int(generator() % unsigned(model_->config().codes));
  for (AttentionMode attention : {AttentionMode::kCausal, AttentionMode::kReference}) {
    SCOPED_TRACE(attention == AttentionMode::kCausal ? "causal" : "reference KV quirk");
    TokenGenerationOptions options;
    options.guidance_scale = c.guidance;
    options.attention = attention;
    const Run cpu = run(*cpu_, c, tokens, options, forced);
    const Run gpu = run(*cuda_, c, tokens, options, forced);
    EXPECT_EQ(gpu.tokens, cpu.tokens);
    EXPECT_LT(relative_error(gpu.trace.raw_logits, cpu.trace.raw_logits), kBackendTolerance);
    EXPECT_LT(relative_error(gpu.trace.combined_logits, cpu.trace.combined_logits), kBackendTolerance);
  }
  // The reference's own teacher-forced run: its causal tokens fed in the quirk mode.
  TokenGenerationOptions options;
  options.guidance_scale = c.guidance;
  options.attention = AttentionMode::kReference;
  const auto causal = ids(name_ + ".causal.tokens");
  const Run gpu = run(*cuda_, c, tokens, options, causal);
  EXPECT_LT(relative_error(gpu.trace.combined_logits, tensor(name_ + ".refkv_forced.logits")), kOracleTolerance);
}

INSTANTIATE_TEST_SUITE_P(EveryCase, CudaSessionForcing,
                         ::testing::Combine(::testing::Values("cfg_bbox", "cfg", "nocfg"), ::testing::Values(0)),
                         case_name);

TEST_F(CudaSessionOracle, Bf16CacheTokenAgreementIsReported) {
  const std::string name = cases().front();
  const Condition c = condition(name);
  const int tokens = int(ids(name + ".causal.tokens").size());
  TokenGenerationOptions options;
  options.guidance_scale = c.guidance;
  const Run exact = run(*cpu_, c, tokens, options);  // what the f32 cache gives (the tests above)
  options.kv_cache.format = KvFormat::kBF16;
  const Run half = run(*cuda_, c, tokens, options);
  ASSERT_EQ(half.tokens.size(), exact.tokens.size());
  int agree = 0;
  for (size_t i = 0; i < exact.tokens.size(); ++i) {
    ASSERT_GE(half.tokens[i], 0);
    ASSERT_LT(half.tokens[i], model_->config().codes);
    if (half.tokens[i] != exact.tokens[i]) break;  // later tokens follow a different prefix
    ++agree;
  }
  const double logit_error = relative_error(half.trace.raw_logits, exact.trace.raw_logits);
  std::printf("[bf16 cache] %s: first %d of %d tokens equal the f32 cache's; logits relative error %.2e\n",
              name.c_str(), agree, tokens, logit_error);
  RecordProperty("bf16_cache_tokens_agreeing", agree);
  // bf16 keys and values round at 2^-8: the logits move by about that, not more.
  EXPECT_LT(logit_error, 2e-2);
}

// Parallel decoding stays on the CPU backend: the CUDA backend opens no
// decoding session and refuses as its supports() does, naming the decoding
// option; decode_tokens refuses it the same way; the CPU backend opens one.
TEST_F(CudaSessionOracle, ParallelDecodingOpensNoCudaSession) {
  const Condition c = condition(cases().front());
  const int count = 4;
  for (const DecodingMode mode : {DecodingMode::kJacobi, DecodingMode::kDiffusion}) {
    DecodingSessionOptions options;
    options.decoding = mode;
    options.positions = count + 1;
    auto refused = cuda_->open_decoding_session(options, c.cond, c.uncond);
    ASSERT_FALSE(refused.ok()) << decoding_mode_name(mode);
    EXPECT_EQ(refused.error().code, ErrorCode::kUnsupported) << refused.error().to_string();
    EXPECT_EQ(error_option(refused.error()), OptionKey::kDecoding);
    EXPECT_NE(refused.error().message.find("CPU backend"), std::string::npos) << refused.error().message;
    EXPECT_TRUE(cpu_->open_decoding_session(options, c.cond, c.uncond).ok()) << decoding_mode_name(mode);
  }
  TokenGenerationOptions generation;
  generation.guidance_scale = c.guidance;
  DecodingOptions jacobi;
  jacobi.mode = DecodingMode::kJacobi;
  auto decoded = decode_tokens(*cuda_, c.cond, c.uncond, count, generation, jacobi);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(error_option(decoded.error()), OptionKey::kDecoding);
  EXPECT_TRUE(decode_tokens(*cpu_, c.cond, c.uncond, count, generation, jacobi).ok());
}

TEST_F(CudaSessionOracle, CancelStopsWithinOneToken) {
  const std::string name = cases().front();
  const Condition c = condition(name);
  TokenGenerationOptions options;
  options.guidance_scale = c.guidance;
  int seen = 0;
  auto tokens = generate_tokens(*cuda_, c.cond, c.uncond, 4, options, [&](const TokenEvent&) { return ++seen < 3; });
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(seen, 3);
}

TEST_F(CudaSessionOracle, SampledTokensAreSeededAndInTheVocabulary) {
  const std::string name = cases().front();
  const Condition c = condition(name);
  TokenGenerationOptions options;
  options.guidance_scale = c.guidance;
  options.sampling = {.greedy = false, .temperature = 1.0f, .top_k = 20, .top_p = 0.9f, .seed = 11};
  auto first = generate_tokens(*cuda_, c.cond, c.uncond, 6, options);
  auto second = generate_tokens(*cuda_, c.cond, c.uncond, 6, options);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(*first, *second);
  for (int token : *first) {
    EXPECT_GE(token, 0);
    EXPECT_LT(token, model_->config().codes);
  }
}

TEST_F(CudaSessionOracle, SessionsReportLaunchesPerStepAndGraphReplay) {
  const GptConfig& config = model_->config();
  const int blocks = config.dual_layers + config.single_layers;
  for (bool graphs : {true, false}) {
    TokenSessionOptions options;
    options.tokens = 4;
    options.cond_length = 3;
    options.cuda_graphs = graphs;
    auto session = cuda_->open_session(options);
    ASSERT_TRUE(session.ok()) << session.error().to_string();
    std::vector<float> cond(size_t(options.batch()) * options.cond_length * config.width, 0.25f);
    ASSERT_TRUE((*session)->prefill(cond).ok());
    ASSERT_TRUE((*session)->enqueue_steps(3).ok());
    std::vector<int> tokens;
    while (tokens.size() < 4) {
      ASSERT_TRUE((*session)->wait_for_token().ok());
      ASSERT_TRUE((*session)->read_tokens(tokens).ok());
    }
    const TokenSessionStats stats = (*session)->stats();
    EXPECT_EQ(stats.graph_replay, graphs && cuda_graphs_enabled_by_environment());
    // Per block: q|k|v (ln_1 fused), attention (q/k norm, RoPE, cache write
    // and the split merge fused), c_proj, gate|up SwiGLU (ln_3 fused), down;
    // then lm_head (ln_f fused) and sampling.
    EXPECT_EQ(stats.kernel_launches_per_step, 5 * blocks + 2);
    EXPECT_GT(stats.device_memory_bytes, 0.0);
  }
  // A KV budget adds kv_budget_update after each block's attention, and only that.
  {
    TokenSessionOptions options;
    options.tokens = 4;
    options.cond_length = 3;
    options.kv_cache.budget = 2;
    auto session = cuda_->open_session(options);
    ASSERT_TRUE(session.ok()) << session.error().to_string();
    std::vector<float> cond(size_t(options.batch()) * options.cond_length * config.width, 0.25f);
    ASSERT_TRUE((*session)->prefill(cond).ok());
    ASSERT_TRUE((*session)->enqueue_steps(3).ok());
    std::vector<int> tokens;
    while (tokens.size() < 4) {
      ASSERT_TRUE((*session)->wait_for_token().ok());
      ASSERT_TRUE((*session)->read_tokens(tokens).ok());
    }
    EXPECT_EQ((*session)->stats().kernel_launches_per_step, 6 * blocks + 2);
  }
}

// The built-in model's recorded prompts: the CUDA backend gives the CPU's tokens.
TEST(CudaSessionBuiltinModel, RecordedPromptsGiveTheCpuTokens) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  auto model = CubeModel::load(CUBEFORGE_BUILTIN_MODEL_DIR);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  auto text = read_file_text(CUBEFORGE_BUILTIN_REFERENCE);
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  const auto reference = nlohmann::json::parse(*text);
  auto selected = select_token_backend(BackendChoice::kCuda, model->gpt());
  ASSERT_TRUE(selected.ok()) << selected.error().to_string();
  const auto cpu = make_cpu_token_backend(model->gpt());
  TokenGenerationOptions options;
  options.guidance_scale = reference.at("guidance").get<float>();
  int checked = 0;
  for (const auto& entry : reference.at("greedy")) {
    if (checked == 1) break;  // a full generation of the built-in model is minutes on the emulator
    const std::string prompt = entry.at("prompt");
    auto cond = encode_prompt(*model, prompt, std::nullopt);
    auto uncond = encode_prompt(*model, "", std::nullopt);
    ASSERT_TRUE(cond.ok() && uncond.ok());
    TokenTrace cpu_trace, gpu_trace;
    auto cpu_tokens = generate_tokens(*cpu, *cond, *uncond, model->shape_tokens(), options, {}, &cpu_trace);
    auto gpu_tokens =
        generate_tokens(*selected->backend, *cond, *uncond, model->shape_tokens(), options, {}, &gpu_trace);
    ASSERT_TRUE(cpu_tokens.ok() && gpu_tokens.ok());
    EXPECT_EQ(*gpu_tokens, *cpu_tokens) << prompt;
    EXPECT_EQ(*gpu_tokens, entry.at("tokens").get<std::vector<int>>()) << prompt;
    EXPECT_LT(relative_error(gpu_trace.raw_logits, cpu_trace.raw_logits), kBackendTolerance) << prompt;
    ++checked;
  }
}

// The first kBuiltinTokens tokens of one prompt on the CPU and the CUDA
// backend with the same options: the same tokens, and raw logits within the
// backends' tolerance. Returns the CUDA run's trace.
constexpr int kBuiltinTokens = 6;  // a whole generation is minutes on the emulator

TokenTrace expect_cuda_tokens_equal_the_cpu(const TokenBackend& cuda, const TokenBackend& cpu,
                                            const std::vector<float>& cond, const std::vector<float>& uncond,
                                            const TokenGenerationOptions& options,
                                            double tolerance = kBackendTolerance) {
  TokenTrace cpu_trace, gpu_trace;
  auto cpu_tokens = generate_tokens(cpu, cond, uncond, kBuiltinTokens, options, {}, &cpu_trace);
  auto gpu_tokens = generate_tokens(cuda, cond, uncond, kBuiltinTokens, options, {}, &gpu_trace);
  EXPECT_TRUE(cpu_tokens.ok()) << cpu_tokens.error().to_string();
  EXPECT_TRUE(gpu_tokens.ok()) << gpu_tokens.error().to_string();
  if (!cpu_tokens.ok() || !gpu_tokens.ok()) return gpu_trace;
  EXPECT_EQ(*gpu_tokens, *cpu_tokens);
  EXPECT_EQ(gpu_trace.raw_logits.size(), cpu_trace.raw_logits.size());
  EXPECT_LT(relative_error(gpu_trace.raw_logits, cpu_trace.raw_logits), tolerance);
  return gpu_trace;
}

// The CPU's run with `other` options gives other raw logits than `gpu_trace`:
// what the options under test change is really applied. The CPU's trace
// goes to `other_trace` when given.
void expect_other_logits(const TokenBackend& cpu, const std::vector<float>& cond, const std::vector<float>& uncond,
                         const TokenGenerationOptions& other, const TokenTrace& gpu_trace,
                         TokenTrace* other_trace = nullptr) {
  TokenTrace trace;
  ASSERT_TRUE(generate_tokens(cpu, cond, uncond, kBuiltinTokens, other, {}, &trace).ok());
  ASSERT_EQ(trace.raw_logits.size(), gpu_trace.raw_logits.size());
  EXPECT_GT(relative_error(gpu_trace.raw_logits, trace.raw_logits), kBackendTolerance);
  if (other_trace) *other_trace = std::move(trace);
}

// The built-in model on the CUDA and the CPU backend, with one prompt's
// condition rows and the empty prompt's.
struct BuiltinOnBothBackends {
  std::optional<CubeModel> model;
  std::shared_ptr<TokenBackend> cuda, cpu;
  std::vector<float> cond, uncond;
};

void open_builtin_on_both_backends(BuiltinOnBothBackends& both) {
  auto model = CubeModel::load(CUBEFORGE_BUILTIN_MODEL_DIR);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  both.model.emplace(std::move(*model));
  auto selected = select_token_backend(BackendChoice::kCuda, both.model->gpt());
  ASSERT_TRUE(selected.ok()) << selected.error().to_string();
  ASSERT_EQ(selected->backend->kind(), BackendKind::kCuda);
  both.cuda = selected->backend;
  both.cpu = make_cpu_token_backend(both.model->gpt());
  auto cond = encode_prompt(*both.model, "a tall wooden chair", std::nullopt);
  auto uncond = encode_prompt(*both.model, "", std::nullopt);
  ASSERT_TRUE(cond.ok() && uncond.ok());
  both.cond = std::move(*cond);
  both.uncond = std::move(*uncond);
}

// Converted and quantised weights run on the device as the CPU runs them:
// the same tokens and logits over the first steps of a prompt (the decode
// kernels widen the codes, the prefill's GEMMs read them dequantised).
TEST(CudaSessionBuiltinModel, WeightFormatsGiveTheCpuTokensAndLogits) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const WeightOptions& weights :
       {WeightOptions{WeightFormat::kBF16, 32}, WeightOptions{WeightFormat::kQ8, 32}, WeightOptions{WeightFormat::kQ4, 64}}) {
    SCOPED_TRACE(std::string(weight_format_name(weights.format)) + " group " + std::to_string(weights.q4_group));
    auto model = CubeModel::load(CUBEFORGE_BUILTIN_MODEL_DIR, {}, weights);
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    auto selected = select_token_backend(BackendChoice::kCuda, model->gpt());
    ASSERT_TRUE(selected.ok()) << selected.error().to_string();
    ASSERT_EQ(selected->backend->kind(), BackendKind::kCuda);
    EXPECT_EQ(selected->backend->weight_bytes(), double(model->gpt().decode_weight_bytes()));
    const auto cpu = make_cpu_token_backend(model->gpt());
    TokenGenerationOptions options;
    options.guidance_scale = 3.0f;
    auto cond = encode_prompt(*model, "a tall wooden chair", std::nullopt);
    auto uncond = encode_prompt(*model, "", std::nullopt);
    ASSERT_TRUE(cond.ok() && uncond.ok());
    expect_cuda_tokens_equal_the_cpu(*selected->backend, *cpu, *cond, *uncond, options);
  }
}

// How far `options`' KV format moves the CPU's raw logits from the exact
// cache's, all else the same (0 for f32), and the tolerance a device run in
// that format is held to: a stored value on a rounding boundary may be one
// code apart, so kStoredCodeShare of that effect, never below the backends'
// tolerance. The exact run's trace goes to `exact_trace` when given.
void stored_format_tolerance(const TokenBackend& cpu, const std::vector<float>& cond,
                             const std::vector<float>& uncond, const TokenGenerationOptions& options,
                             double* effect, double* tolerance, TokenTrace* exact_trace = nullptr) {
  TokenGenerationOptions exact = options;
  exact.kv_cache.format = KvFormat::kF32;
  TokenTrace cpu_stored, cpu_exact;
  ASSERT_TRUE(generate_tokens(cpu, cond, uncond, kBuiltinTokens, options, {}, &cpu_stored).ok());
  ASSERT_TRUE(generate_tokens(cpu, cond, uncond, kBuiltinTokens, exact, {}, &cpu_exact).ok());
  *effect = relative_error(cpu_stored.raw_logits, cpu_exact.raw_logits);
  *tolerance = std::max(kBackendTolerance, kStoredCodeShare * *effect);
  if (exact_trace) *exact_trace = std::move(cpu_exact);
}

// The CPU's bf16, fp8 and int8 KV caches run on the device as the CPU runs
// them: the prefill attends exact, then both backends store the keys and
// values in the format and the decode steps read the stored bf16 bits, or
// codes and scales. The stored values are rounded from what each backend
// computed, and the device's GEMMs sum in another order than the CPU's, so
// a value on a rounding boundary can be stored one code apart: the tokens
// agree, and the logits agree far more closely than the format moves them
// from the exact cache's (kStoredCodeShare of that).
TEST(CudaSessionBuiltinModel, StoredKvCachesGiveTheCpuTokensAndLogits) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  BuiltinOnBothBackends both;
  ASSERT_NO_FATAL_FAILURE(open_builtin_on_both_backends(both));
  const TokenBackend& cuda = *both.cuda;
  const TokenBackend& cpu = *both.cpu;
  const std::vector<float>& cond = both.cond;
  const std::vector<float>& uncond = both.uncond;
  for (const KvFormat format : {KvFormat::kBF16, KvFormat::kFp8, KvFormat::kInt8}) {
    SCOPED_TRACE(std::string(kv_format_name(format)) + " KV cache");
    TokenGenerationOptions options;
    options.guidance_scale = 3.0f;
    options.kv_cache.format = format;
    TokenGenerationOptions exact = options;
    exact.kv_cache.format = KvFormat::kF32;
    double format_effect = 0, tolerance = 0;
    TokenTrace cpu_exact;
    ASSERT_NO_FATAL_FAILURE(
        stored_format_tolerance(cpu, cond, uncond, options, &format_effect, &tolerance, &cpu_exact));
    const TokenTrace gpu_trace = expect_cuda_tokens_equal_the_cpu(cuda, cpu, cond, uncond, options, tolerance);
    ASSERT_FALSE(gpu_trace.raw_logits.empty());
    // The stored form is read: the decode steps' logits are far from the exact
    // cache's, as the CPU's stored run is.
    EXPECT_GT(relative_error(gpu_trace.raw_logits, cpu_exact.raw_logits), 0.5 * format_effect);
    TokenTrace exact_trace;
    ASSERT_NO_FATAL_FAILURE(expect_other_logits(cpu, cond, uncond, exact, gpu_trace, &exact_trace));
    // The prefill is not: token 0's logits are the exact cache's (the prefill
    // attends over the exact keys and values, then stores them in the form).
    const std::size_t vocab = exact_trace.combined_logits.size() / kBuiltinTokens;
    ASSERT_EQ(gpu_trace.combined_logits.size(), exact_trace.combined_logits.size());
    EXPECT_LT(relative_error(std::vector<float>(gpu_trace.combined_logits.begin(),
                                                gpu_trace.combined_logits.begin() + std::ptrdiff_t(vocab)),
                             std::vector<float>(exact_trace.combined_logits.begin(),
                                                exact_trace.combined_logits.begin() + std::ptrdiff_t(vocab))),
              kBackendTolerance);
  }
}

// A KV budget runs on the device as on the CPU: per layer and batch row the
// same slot leaves (kv_budget_update over the attention's scores), so tokens
// and logits agree as without one. The budget of 4 evicts from position 4
// on, choosing by attention among positions 1 and 2 (then 1..3), within the
// few steps decoded; the logits differ from the whole cache's. A stored
// format's codes may lie one apart, as in StoredKvCachesGiveTheCpuTokensAndLogits,
// and the logits are held to the same share of what the format moves them.
TEST(CudaSessionBuiltinModel, KvBudgetsGiveTheCpuTokensAndLogits) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  BuiltinOnBothBackends both;
  ASSERT_NO_FATAL_FAILURE(open_builtin_on_both_backends(both));
  const TokenBackend& cuda = *both.cuda;
  const TokenBackend& cpu = *both.cpu;
  const std::vector<float>& cond = both.cond;
  const std::vector<float>& uncond = both.uncond;
  for (const KvFormat format : {KvFormat::kF32, KvFormat::kFp8}) {
    SCOPED_TRACE(std::string(kv_format_name(format)) + " KV cache, budget 4");
    TokenGenerationOptions options;
    options.guidance_scale = 3.0f;
    options.kv_cache.format = format;
    options.kv_cache.budget = 4;
    double format_effect = 0, tolerance = 0;
    ASSERT_NO_FATAL_FAILURE(stored_format_tolerance(cpu, cond, uncond, options, &format_effect, &tolerance));
    const TokenTrace gpu_trace = expect_cuda_tokens_equal_the_cpu(cuda, cpu, cond, uncond, options, tolerance);
    ASSERT_FALSE(gpu_trace.raw_logits.empty());
    // The budget is applied: the whole cache of the same form gives other logits.
    TokenGenerationOptions whole = options;
    whole.kv_cache.budget = 0;
    expect_other_logits(cpu, cond, uncond, whole, gpu_trace);
  }
}

// A random orthonormal basis of `rank` keys and values per layer, loaded at
// that rank.
std::shared_ptr<const LowRankKv> random_kv_bases(const GptConfig& config, int rank) {
  std::vector<KvLayerBasis> bases;
  for (int l = 0; l < config.dual_layers + config.single_layers; ++l) {
    KvLayerBasis basis;
    const auto keys = cubeforge::testing::orthonormal_rows(config.width, uint32_t(11 + 2 * l));
    const auto values = cubeforge::testing::orthonormal_rows(config.width, uint32_t(12 + 2 * l));
    basis.keys.assign(keys.begin(), keys.begin() + std::ptrdiff_t(rank) * config.width);
    basis.values.assign(values.begin(), values.begin() + std::ptrdiff_t(rank) * config.width);
    bases.push_back(std::move(basis));
  }
  const auto file = std::filesystem::temp_directory_path() / ("cubeforge-cuda-kv-bases-" + std::to_string(::getpid()) +
                                                              "-" + std::to_string(rank) + ".safetensors");
  EXPECT_TRUE(write_kv_bases(file, bases, config.width).ok());
  auto low_rank = LowRankKv::load(file, config, rank);
  std::filesystem::remove(file);
  EXPECT_TRUE(low_rank.ok()) << low_rank.error().to_string();
  return low_rank.ok() ? *low_rank : nullptr;
}

// A KV rank runs on the device as on the CPU: the prefill attends exact and
// stores the compressed rows, each decode step compresses its key and value
// before every head attends over the one latent head, so tokens and logits
// agree; the logits differ from the full-rank cache's of the same form.
TEST(CudaSessionBuiltinModel, KvRanksGiveTheCpuTokensAndLogits) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  BuiltinOnBothBackends both;
  ASSERT_NO_FATAL_FAILURE(open_builtin_on_both_backends(both));
  const TokenBackend& cuda = *both.cuda;
  const TokenBackend& cpu = *both.cpu;
  const std::vector<float>& cond = both.cond;
  const std::vector<float>& uncond = both.uncond;
  const auto low_rank = random_kv_bases(both.model->gpt().config(), 16);
  ASSERT_TRUE(low_rank);
  for (const KvFormat format : {KvFormat::kF32, KvFormat::kInt8}) {
    SCOPED_TRACE(std::string(kv_format_name(format)) + " KV cache, rank 16");
    TokenGenerationOptions options;
    options.guidance_scale = 3.0f;
    options.kv_cache.format = format;
    options.kv_cache.low_rank = low_rank;
    ASSERT_TRUE(cuda::supports(both.model->gpt().config(), {options}).ok());
    const TokenTrace gpu_trace = expect_cuda_tokens_equal_the_cpu(cuda, cpu, cond, uncond, options);
    ASSERT_FALSE(gpu_trace.raw_logits.empty());
    TokenGenerationOptions whole = options;
    whole.kv_cache.low_rank = nullptr;
    expect_other_logits(cpu, cond, uncond, whole, gpu_trace);
  }
}

// What the backend says it supports (what backend choice, the tool and the
// app ask) is what the kernels run: KV ranks are the attention's head sizes
// (head_dim_supported), and a refusal names the option at fault.
TEST(CudaSupports, KvRanksAreTheKernelsHeadSizes) {
  const GptConfig config = cubeforge::testing::small_gpt_config(64);
  for (int rank = 1; rank <= 1024; ++rank) {
    BackendRequest request;
    request.decode.kv_cache.rank = rank;
    const Status answer = cuda::supports(config, request);
    EXPECT_EQ(answer.ok(), head_dim_supported(rank)) << rank;
    if (!answer.ok()) {
      EXPECT_EQ(error_option(answer.error()), OptionKey::kKvRank) << rank;
    }
  }
  for (int rank = 16; rank <= 256; rank += 16) {
    BackendRequest request;
    request.decode.kv_cache.rank = rank;
    request.decode.kv_cache.budget = 8;
    const Status answer = cuda::supports(config, request);
    ASSERT_FALSE(answer.ok()) << rank;
    EXPECT_EQ(error_option(answer.error()), OptionKey::kKvBudget);
  }
}

TEST(CudaSupports, ParallelDecodingAndTracesRunOnTheCpu) {
  const GptConfig config = cubeforge::testing::small_gpt_config(64);
  for (const DecodingMode mode : {DecodingMode::kJacobi, DecodingMode::kDiffusion}) {
    const Status answer = cuda::supports(config, BackendRequest{{}, mode, false});
    ASSERT_FALSE(answer.ok()) << decoding_mode_name(mode);
    EXPECT_EQ(error_option(answer.error()), OptionKey::kDecoding);
    EXPECT_NE(answer.error().message.find("CPU backend"), std::string::npos) << answer.error().message;
  }
  const Status traced = cuda::supports(config, BackendRequest{{}, DecodingMode::kSequential, true});
  ASSERT_FALSE(traced.ok());
  EXPECT_EQ(error_option(traced.error()), OptionKey::kTrace);
  EXPECT_TRUE(cuda::supports(config, BackendRequest{}).ok());
}

// A model whose head size lies between the powers of two the kernels are
// built for (width 96 over 2 heads: 48; the backend used to refuse all but
// 16, 32, 64 and 128): the CUDA backend opens it and gives the CPU's tokens
// and logits with the graph, without the KV cache, with an fp8 cache and
// with a KV rank of 48. Random weights.
TEST(CudaSessionHeadDims, AModelWithHeadDim48GivesTheCpuTokensAndLogits) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  const GptConfig config = cubeforge::testing::small_gpt_config(96);
  ASSERT_EQ(config.head_dim(), 48);
  auto file = random_weights_file(expected_gpt_tensors(config), 23, DType::kF32, "head-dim-48.safetensors");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  auto model = DualStreamGpt::from_file(std::move(*file), config);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  auto selected = select_token_backend(BackendChoice::kCuda, *model);
  ASSERT_TRUE(selected.ok()) << selected.error().to_string();
  ASSERT_EQ(selected->backend->kind(), BackendKind::kCuda);
  const auto cpu = make_cpu_token_backend(*model);

  constexpr int kTextTokens = 5;
  std::vector<float> text(std::size_t(kTextTokens) * config.text_width), empty(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    text[i] = float(std::cos(0.37 * double(i)));
    empty[i] = float(0.1 * std::sin(0.11 * double(i)));
  }
  const float bbox[3] = {0.6f, 0.3f, 0.9f};
  auto cond = model->project_condition(text, bbox);
  auto uncond = model->project_condition(empty, bbox);
  ASSERT_TRUE(cond.ok() && uncond.ok());

  TokenGenerationOptions graph;
  graph.guidance_scale = 3.0f;
  TokenGenerationOptions no_cache = graph;
  no_cache.use_kv_cache = false;
  TokenGenerationOptions fp8 = graph;
  fp8.kv_cache.format = KvFormat::kFp8;
  TokenGenerationOptions rank = graph;
  rank.kv_cache.low_rank = random_kv_bases(config, 48);
  ASSERT_TRUE(rank.kv_cache.low_rank);
  ASSERT_TRUE(cuda::supports(config, {rank}).ok());
  for (const auto& [name, options] : {std::pair{"graph", graph}, std::pair{"no KV cache", no_cache},
                                      std::pair{"fp8 KV cache", fp8}, std::pair{"KV rank 48", rank}}) {
    SCOPED_TRACE(name);
    const TokenTrace trace = expect_cuda_tokens_equal_the_cpu(*selected->backend, *cpu, *cond, *uncond, options);
    EXPECT_FALSE(trace.raw_logits.empty());
  }
}

// Ranks the decode attention cannot take, and a rank with a budget, stay on
// the CPU backend: refused, naming the value and the CPU backend. A budget
// with the int8 cache is refused as the CPU refuses it.
TEST(CudaSessionBuiltinModel, OtherKvRanksRunOnTheCpu) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  auto exact = CubeModel::load(CUBEFORGE_BUILTIN_MODEL_DIR);
  ASSERT_TRUE(exact.ok()) << exact.error().to_string();
  auto cuda = select_token_backend(BackendChoice::kCuda, exact->gpt());
  ASSERT_TRUE(cuda.ok()) << cuda.error().to_string();
  const GptConfig& config = exact->gpt().config();

  TokenSessionOptions options;
  options.tokens = 4;
  options.cond_length = exact->gpt().condition_length(77);
  options.kv_cache.format = KvFormat::kFp8;
  options.kv_cache.low_rank = random_kv_bases(config, 4);
  EXPECT_FALSE(cuda->backend->supports({options}).ok());
  auto rank = cuda->backend->open_session(options);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.error().message.find("rank of 4"), std::string::npos) << rank.error().to_string();
  EXPECT_NE(rank.error().message.find("a multiple of 16 from 16 to 256"), std::string::npos) << rank.error().to_string();
  EXPECT_NE(rank.error().message.find("CPU backend"), std::string::npos) << rank.error().to_string();
  options.kv_cache.low_rank = random_kv_bases(config, 16);
  options.kv_cache.budget = 8;
  EXPECT_FALSE(cuda->backend->supports({options}).ok());
  auto with_budget = cuda->backend->open_session(options);
  ASSERT_FALSE(with_budget.ok());
  EXPECT_NE(with_budget.error().message.find("KV rank (16) or a KV budget (8)"), std::string::npos)
      << with_budget.error().to_string();
  EXPECT_NE(with_budget.error().message.find("CPU backend"), std::string::npos) << with_budget.error().to_string();
  options.kv_cache.low_rank = nullptr;
  options.kv_cache.format = KvFormat::kInt8;
  options.kv_cache.budget = 8;
  auto int8_budget = cuda->backend->open_session(options);
  ASSERT_FALSE(int8_budget.ok());
  EXPECT_NE(int8_budget.error().message.find("INT8"), std::string::npos) << int8_budget.error().to_string();
}

// The whole pipeline over the seam: generate_shape with the CUDA backend, on
// the fixture's model folder (CLIP, GPT and shape tokenizer).
TEST(CudaSessionPipeline, GenerateShapeRunsOnTheCudaBackend) {
  CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE();
  CUBEFORGE_REQUIRE_ORACLE();
  auto model = CubeModel::load(oracle_dir());
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  auto selected = select_token_backend(BackendChoice::kAuto, model->gpt());
  ASSERT_TRUE(selected.ok()) << selected.error().to_string();
  EXPECT_EQ(selected->backend->kind(), BackendKind::kCuda) << selected->reason;
  GenerationRequest request;
  request.prompt = "a red dragon";
  request.resolution = 5;
  request.backend = BackendChoice::kCuda;
  request.token_backend = selected->backend;
  auto on_gpu = generate_shape(*model, request);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.error().to_string();
  request.backend = BackendChoice::kCpu;
  request.token_backend = nullptr;
  auto on_cpu = generate_shape(*model, request);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.error().to_string();
  EXPECT_EQ(on_gpu->tokens, on_cpu->tokens);
  EXPECT_EQ(on_gpu->mesh.face_count(), on_cpu->mesh.face_count());
  // Asking for CUDA without opening it is an error, not a quiet CPU run.
  request.backend = BackendChoice::kCuda;
  EXPECT_FALSE(generate_shape(*model, request).ok());
}

}  // namespace
}  // namespace cubeforge::cuda::testing
