// The GPT against the reference fixtures: the load-time codebook copy, the
// condition, and greedy generation in every case and attention mode, with the
// KV cache and without, plus teacher-forced per-step logits.
#include <gtest/gtest.h>

#include <optional>

#include "inference/backend/generate.h"
#include "inference/model/gpt.h"
#include "support/oracle.h"

namespace cubeforge {
namespace {

using testing::kOracleTolerance;
using testing::oracle_dir;
using testing::relative_error;

class GptOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
    ASSERT_TRUE(expected.ok()) << expected.error().to_string();
    expected_ = std::move(*expected);
    const GptConfig* config = nullptr;
    std::optional<ModelConfig> yaml;
    if (std::filesystem::exists(oracle_dir() / "config.yaml")) {
      auto parsed = parse_model_config_yaml(oracle_dir() / "config.yaml");
      ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
      yaml = *parsed;
      config = &yaml->gpt;
    }
    auto model = DualStreamGpt::load(oracle_dir() / "shape_gpt.safetensors", config);
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_.emplace(std::move(*model));
    auto codebook = expected_.read_f32("decode.codebook");
    ASSERT_TRUE(codebook.ok()) << codebook.error().to_string();
    ASSERT_TRUE(model_->install_codebook(*codebook).ok());
  }

  std::vector<float> tensor(const std::string& name) {
    auto t = expected_.read_f32(name);
    EXPECT_TRUE(t.ok()) << t.error().to_string();
    return t.ok() ? *t : std::vector<float>{};
  }
  std::vector<int> ids(const std::string& name) {
    auto t = expected_.read_i64(name);
    EXPECT_TRUE(t.ok()) << t.error().to_string();
    return t.ok() ? std::vector<int>(t->begin(), t->end()) : std::vector<int>{};
  }
  std::vector<std::string> cases() {
    std::vector<std::string> found;
    for (const char* name : {"cfg_bbox", "cfg", "nocfg"})
      if (expected_.contains(std::string(name) + ".cond")) found.push_back(name);
    return found;
  }

  // The reference's condition rows for a case: [B, S, d].
  std::vector<float> condition(const std::string& name, int* batch) {
    auto view = expected_.get(name + ".cond");
    EXPECT_TRUE(view.ok());
    *batch = int(view->shape()[0]);
    std::vector<float> bbox;
    const bool with_bbox = name == "cfg_bbox";
    if (with_bbox) bbox = tensor("bbox");
    auto cond = model_->project_condition(tensor("text_embed"), with_bbox ? bbox.data() : nullptr);
    EXPECT_TRUE(cond.ok());
    std::vector<float> rows = *cond;
    if (*batch == 2) {
      auto uncond = model_->project_condition(tensor("uncond_text_embed"), nullptr);
      EXPECT_TRUE(uncond.ok());
      rows.insert(rows.end(), uncond->begin(), uncond->end());
    }
    return rows;
  }

  SafetensorsFile expected_;
  std::optional<DualStreamGpt> model_;
};

TEST_F(GptOracle, CodebookCopyIntoTokenEmbedding) {
  auto table = model_->token_embedding_table();
  EXPECT_LT(relative_error(table, tensor("wte_after_codebook_copy")), kOracleTolerance);
  auto bos = model_->token_embedding(model_->config().bos_id());
  EXPECT_LT(relative_error(bos, tensor("bos_embed")), kOracleTolerance);
}

TEST_F(GptOracle, ConditionMatchesReference) {
  for (const auto& name : cases()) {
    int batch = 0;
    auto rows = condition(name, &batch);
    EXPECT_LT(relative_error(rows, tensor(name + ".cond")), kOracleTolerance) << name;
  }
}

struct Mode {
  const char* fixture;  // causal | refkv
  AttentionMode attention;
  bool kv_cache;
};

TEST_F(GptOracle, GreedyTokensAndLogitsInEveryMode) {
  const Mode modes[] = {{"causal", AttentionMode::kCausal, true},
                        {"causal", AttentionMode::kCausal, false},
                        {"refkv", AttentionMode::kReference, true}};
  ASSERT_FALSE(cases().empty());
  for (const auto& name : cases()) {
    int batch = 0;
    auto rows = condition(name, &batch);
    const size_t half = rows.size() / size_t(batch);
    std::span<const float> cond(rows.data(), half);
    std::span<const float> uncond = batch == 2 ? std::span<const float>(rows.data() + half, half) : std::span<const float>();
    for (const Mode& mode : modes) {
      const std::string prefix = name + "." + mode.fixture;
      const auto expected_tokens = ids(prefix + ".tokens");
      TokenGenerationOptions options;
      options.guidance_scale = batch == 2 ? 3.0f : 0.0f;
      options.attention = mode.attention;
      options.use_kv_cache = mode.kv_cache;
      TokenTrace trace;
      auto tokens = generate_tokens(*model_, cond, uncond, int(expected_tokens.size()), options, {}, &trace);
      ASSERT_TRUE(tokens.ok()) << tokens.error().to_string();
      EXPECT_EQ(*tokens, expected_tokens) << prefix << (mode.kv_cache ? " (KV cache)" : " (no cache)");
      EXPECT_LT(relative_error(trace.combined_logits, tensor(prefix + ".logits")), kOracleTolerance) << prefix;
      EXPECT_LT(relative_error(trace.raw_logits, tensor(prefix + ".raw_logits")), kOracleTolerance) << prefix;
    }
  }
}

TEST_F(GptOracle, ReferenceModeTeacherForcedLogits) {
  for (const auto& name : cases()) {
    int batch = 0;
    auto rows = condition(name, &batch);
    const size_t half = rows.size() / size_t(batch);
    std::span<const float> cond(rows.data(), half);
    std::span<const float> uncond = batch == 2 ? std::span<const float>(rows.data() + half, half) : std::span<const float>();
    const auto forced = ids(name + ".causal.tokens");
    TokenGenerationOptions options;
    options.guidance_scale = batch == 2 ? 3.0f : 0.0f;
    options.attention = AttentionMode::kReference;
    TokenTrace trace;
    auto tokens = generate_tokens(*model_, cond, uncond, int(forced.size()), options, {}, &trace, forced);
    ASSERT_TRUE(tokens.ok()) << tokens.error().to_string();
    EXPECT_LT(relative_error(trace.combined_logits, tensor(name + ".refkv_forced.logits")), kOracleTolerance) << name;
  }
}

TEST_F(GptOracle, CancelStopsWithinOneToken) {
  auto name = cases().front();
  int batch = 0;
  auto rows = condition(name, &batch);
  const size_t half = rows.size() / size_t(batch);
  TokenGenerationOptions options;
  options.guidance_scale = batch == 2 ? 3.0f : 0.0f;
  int seen = 0;
  auto tokens = generate_tokens(*model_, std::span<const float>(rows.data(), half),
                                batch == 2 ? std::span<const float>(rows.data() + half, half) : std::span<const float>(),
                                8, options, [&](const TokenEvent&) { return ++seen < 3; });
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(seen, 3);
}

}  // namespace
}  // namespace cubeforge
