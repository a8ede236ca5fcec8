// The GPT against the reference fixtures: the load-time codebook copy, the
// condition, and greedy generation in every case and attention mode, with the
// KV cache and without, plus teacher-forced per-step logits. Traces of the
// same runs: they change no bit of the results, carry every named point with
// its shape, and their logits are the reference's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "inference/backend/generate.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/model/gpt.h"
#include "inference/tensor/trace_file.h"
#include "tests/support/oracle.h"
#include "tests/support/oracle_gpt.h"

namespace cubeforge {
namespace {

using testing::kOracleTolerance;
using testing::oracle_dir;
using testing::relative_error;

class GptOracle : public ::testing::Test, protected testing::OracleGpt {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    ASSERT_NO_FATAL_FAILURE(load_oracle_gpt());
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

TEST_F(GptOracle, TracingChangesNoBitOfTokensOrLogits) {
  const Mode modes[] = {{"causal", AttentionMode::kCausal, true},
                        {"causal", AttentionMode::kCausal, false},
                        {"refkv", AttentionMode::kReference, true}};
  for (const auto& name : cases()) {
    int batch = 0;
    auto rows = condition(name, &batch);
    const size_t half = rows.size() / size_t(batch);
    std::span<const float> cond(rows.data(), half);
    std::span<const float> uncond = batch == 2 ? std::span<const float>(rows.data() + half, half) : std::span<const float>();
    for (const Mode& mode : modes) {
      const std::string prefix = name + "." + mode.fixture + (mode.kv_cache ? "" : " (no cache)");
      const int count = int(ids(name + "." + mode.fixture + ".tokens").size());
      TokenGenerationOptions options;
      options.guidance_scale = batch == 2 ? 3.0f : 0.0f;
      options.attention = mode.attention;
      options.use_kv_cache = mode.kv_cache;
      TokenTrace plain, traced;
      auto untraced_tokens = generate_tokens(*model_, cond, uncond, count, options, {}, &plain);
      TraceRecorder recorder;
      options.trace = &recorder;
      options.trace_decode_steps = count;
      auto traced_tokens = generate_tokens(*model_, cond, uncond, count, options, {}, &traced);
      ASSERT_TRUE(untraced_tokens.ok() && traced_tokens.ok());
      EXPECT_EQ(*untraced_tokens, *traced_tokens) << prefix;
      ASSERT_EQ(plain.raw_logits.size(), traced.raw_logits.size());
      EXPECT_EQ(std::memcmp(plain.raw_logits.data(), traced.raw_logits.data(), plain.raw_logits.size() * sizeof(float)), 0)
          << prefix;
      EXPECT_FALSE(recorder.tensors().empty()) << prefix;
    }
  }
}

// The names and shapes one prefill or decode step records (inference/tensor/trace.h).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_step_names(const GptConfig& c, const std::string& scope,
                                                                              bool prefill, int64_t B, int64_t S,
                                                                              int64_t L, bool reference_decode) {
  const int64_t d = c.width;
  std::vector<std::pair<std::string, std::vector<int64_t>>> names;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) { names.emplace_back(scope + "." + name, shape); };
  auto post = [&](const std::string& at, const char* norm, int64_t rows) {
    add(at + "attn", {B, rows, d});
    add(at + "attn_residual", {B, rows, d});
    add(at + norm, {B, rows, d});
    add(at + "mlp_hidden", {B, rows, 4 * d});
    add(at + "out", {B, rows, d});
  };
  if (prefill) add("condition", {B, S, d});
  add("shape_embeddings", {B, L, d});
  for (int i = 0; i < c.dual_layers; ++i) {
    const std::string x = "dual." + std::to_string(i) + ".x.", cs = "dual." + std::to_string(i) + ".c.";
    const bool last = i == c.dual_layers - 1;
    if (prefill) {
      add(cs + "ln_2", {B, S, d});
      if (!last) add(cs + "q", {B, S, d});
      add(cs + "k", {B, S, d});
      add(cs + "v", {B, S, d});
    }
    add(x + "ln_1", {B, L, d});
    for (const char* p : {"q", "k", "v"}) add(x + p, {B, L, d});
    post(x, "ln_3", L);
    if (prefill && !last) post(cs, "ln_3", S);
  }
  for (int i = 0; i < c.single_layers; ++i) {
    const std::string at = "single." + std::to_string(i) + ".";
    add(at + "ln_1", {B, L, d});
    if (!reference_decode) add(at + "q", {B, L, d});
    add(at + "k", {B, L, d});
    add(at + "v", {B, L, d});
    post(at, "ln_2", L);
  }
  add("ln_f", {B, d});
  add("logits", {B, c.vocab_size()});
  add("guided_logits", {c.codes});
  add("token", {1});
  return names;
}

TEST_F(GptOracle, TraceHasEveryNamedPointAndTheReferenceLogits) {
  const GptConfig& c = model_->config();
  const int decode_steps = 3;
  for (const auto& name : cases()) {
    int batch = 0;
    auto rows = condition(name, &batch);
    const size_t half = rows.size() / size_t(batch);
    const int64_t S = int64_t(half) / c.width;
    std::span<const float> cond(rows.data(), half);
    std::span<const float> uncond = batch == 2 ? std::span<const float>(rows.data() + half, half) : std::span<const float>();
    for (const Mode mode : {Mode{"causal", AttentionMode::kCausal, true}, Mode{"refkv", AttentionMode::kReference, true}}) {
      const std::string prefix = name + "." + mode.fixture;
      const auto expected_tokens = ids(prefix + ".tokens");
      TokenGenerationOptions options;
      options.guidance_scale = batch == 2 ? 3.0f : 0.0f;
      options.attention = mode.attention;
      TraceRecorder recorder;
      options.trace = &recorder;
      options.trace_decode_steps = decode_steps;
      auto tokens = generate_tokens(*model_, cond, uncond, int(expected_tokens.size()), options);
      ASSERT_TRUE(tokens.ok()) << tokens.error().to_string();

      // Every name, in order, with its shape; nothing after the last traced step.
      std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
      for (int step = 0; step <= decode_steps; ++step) {
        auto names = expected_step_names(c, step == 0 ? "prefill" : "decode." + std::to_string(step), step == 0, batch,
                                         S, 1, step > 0 && mode.attention == AttentionMode::kReference);
        expected.insert(expected.end(), names.begin(), names.end());
      }
      ASSERT_EQ(recorder.tensors().size(), expected.size()) << prefix;
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(recorder.tensors()[i].name, expected[i].first) << prefix;
        EXPECT_EQ(recorder.tensors()[i].shape, expected[i].second) << prefix << " " << expected[i].first;
        EXPECT_EQ(recorder.tensors()[i].dtype, expected[i].first.ends_with(".token") ? DType::kI64 : DType::kF32);
      }

      // The logits of each step are the reference's per-step raw logits
      // [B, T, V + 3]; the guided ones and the token are the step's.
      const auto raw = tensor(prefix + ".raw_logits");
      const auto guided = tensor(prefix + ".logits");
      const size_t vocab = size_t(c.vocab_size()), steps = expected_tokens.size();
      auto values = [&](const std::string& tensor_name) {
        const TraceRecorder::Tensor* t = recorder.find(tensor_name);
        EXPECT_NE(t, nullptr) << tensor_name;
        std::vector<float> out(t ? t->data.size() / sizeof(float) : 0);
        if (t) std::memcpy(out.data(), t->data.data(), t->data.size());
        return out;
      };
      for (int step = 0; step <= decode_steps; ++step) {
        const std::string scope = step == 0 ? "prefill" : "decode." + std::to_string(step);
        std::vector<float> reference_logits;
        for (int b = 0; b < batch; ++b) {
          const float* row = raw.data() + (size_t(b) * steps + size_t(step)) * vocab;
          reference_logits.insert(reference_logits.end(), row, row + vocab);
        }
        EXPECT_LT(relative_error(values(scope + ".logits"), reference_logits), kOracleTolerance) << prefix << " " << scope;
        const float* guided_row = guided.data() + size_t(step) * size_t(c.codes);
        EXPECT_LT(relative_error(values(scope + ".guided_logits"), std::span<const float>(guided_row, size_t(c.codes))),
                  kOracleTolerance)
            << prefix << " " << scope;
        const TraceRecorder::Tensor* token = recorder.find(scope + ".token");
        ASSERT_NE(token, nullptr);
        int64_t chosen = -1;
        std::memcpy(&chosen, token->data.data(), sizeof chosen);
        EXPECT_EQ(chosen, expected_tokens[size_t(step)]) << prefix << " " << scope;
        // A decode step is fed the previous step's token.
        if (step > 0) {
          auto fed = model_->token_embedding(expected_tokens[size_t(step - 1)]);
          auto embeddings = values(scope + ".shape_embeddings");
          for (int b = 0; b < batch; ++b)
            EXPECT_EQ(std::memcmp(embeddings.data() + size_t(b) * c.width, fed.data(), fed.size_bytes()), 0) << scope;
        }
      }
      EXPECT_LT(relative_error(values("prefill.condition"), rows), kOracleTolerance) << prefix;

      // The points carry what their names say: each LayerNorm (no affine) is
      // that of the stream it names...
      auto expect_layer_norm = [&](const std::string& input, const std::string& output) {
        const auto x = values(input), y = values(output);
        ASSERT_EQ(x.size(), y.size()) << input;
        for (size_t row = 0; row < x.size() / size_t(c.width); ++row) {
          const float* in = x.data() + row * size_t(c.width);
          double mean = 0, variance = 0;
          for (int i = 0; i < c.width; ++i) mean += in[i];
          mean /= c.width;
          for (int i = 0; i < c.width; ++i) variance += (in[i] - mean) * (in[i] - mean);
          variance /= c.width;
          for (int i = 0; i < c.width; ++i)
            ASSERT_NEAR(y[row * size_t(c.width) + size_t(i)], (in[i] - mean) / std::sqrt(variance + c.eps), 1e-4)
                << output << " row " << row;
        }
      };
      expect_layer_norm("prefill.shape_embeddings", "prefill.dual.0.x.ln_1");
      expect_layer_norm("prefill.condition", "prefill.dual.0.c.ln_2");
      expect_layer_norm("prefill.dual.0.x.out", "prefill.dual.1.x.ln_1");
      expect_layer_norm("decode.1.dual.0.x.attn_residual", "decode.1.dual.0.x.ln_3");
      const std::string last_out = c.single_layers > 0 ? "decode.1.single." + std::to_string(c.single_layers - 1) + ".out"
                                                       : "decode.1.dual." + std::to_string(c.dual_layers - 1) + ".x.out";
      expect_layer_norm(last_out, "decode.1.ln_f");

      // ...and the first dual block's attention over [condition ; shape] is
      // causal softmax attention of its q, k and v.
      const auto cq = values("prefill.dual.0.c.q"), ck = values("prefill.dual.0.c.k"), cv = values("prefill.dual.0.c.v");
      const auto xq = values("prefill.dual.0.x.q"), xk = values("prefill.dual.0.x.k"), xv = values("prefill.dual.0.x.v");
      const auto c_attn = values("prefill.dual.0.c.attn"), x_attn = values("prefill.dual.0.x.attn");
      const int64_t head_dim = c.head_dim(), positions = S + 1;
      for (int b = 0; b < batch; ++b) {
        auto row_of = [&](const std::vector<float>& cond_part, const std::vector<float>& shape_part, int64_t i) {
          return i < S ? cond_part.data() + (size_t(b) * S + size_t(i)) * c.width : shape_part.data() + size_t(b) * c.width;
        };
        std::vector<float> computed, traced;
        for (int64_t i = 0; i < positions; ++i) {
          const float* attn_row = row_of(c_attn, x_attn, i);
          traced.insert(traced.end(), attn_row, attn_row + c.width);
          for (int h = 0; h < c.heads; ++h) {
            std::vector<double> scores(size_t(i + 1));
            double largest = -INFINITY, total = 0;
            for (int64_t j = 0; j <= i; ++j) {
              double dot = 0;
              for (int64_t e = 0; e < head_dim; ++e)
                dot += double(row_of(cq, xq, i)[h * head_dim + e]) * row_of(ck, xk, j)[h * head_dim + e];
              scores[size_t(j)] = dot / std::sqrt(double(head_dim));
              largest = std::max(largest, scores[size_t(j)]);
            }
            for (double& score : scores) total += (score = std::exp(score - largest));
            for (int64_t e = 0; e < head_dim; ++e) {
              double sum = 0;
              for (int64_t j = 0; j <= i; ++j) sum += scores[size_t(j)] / total * row_of(cv, xv, j)[h * head_dim + e];
              computed.push_back(float(sum));
            }
          }
        }
        EXPECT_LT(relative_error(traced, computed), kOracleTolerance) << prefix << " row " << b;
      }
    }
  }
}

TEST_F(GptOracle, TraceWithoutTheCacheNamesEachStepsWholeSequence) {
  const std::string name = cases().front();
  int batch = 0;
  auto rows = condition(name, &batch);
  const size_t half = rows.size() / size_t(batch);
  TokenGenerationOptions options;
  options.guidance_scale = batch == 2 ? 3.0f : 0.0f;
  options.use_kv_cache = false;
  TraceRecorder recorder;
  options.trace = &recorder;
  options.trace_decode_steps = 2;
  auto tokens = generate_tokens(*model_, std::span<const float>(rows.data(), half),
                                batch == 2 ? std::span<const float>(rows.data() + half, half) : std::span<const float>(),
                                4, options);
  ASSERT_TRUE(tokens.ok());
  const int64_t d = model_->config().width;
  const TraceRecorder::Tensor* step2 = recorder.find("decode.2.dual.0.x.ln_1");
  ASSERT_NE(step2, nullptr);
  EXPECT_EQ(step2->shape, (std::vector<int64_t>{batch, 3, d}));  // BOS and two tokens
  EXPECT_NE(recorder.find("decode.2.dual.0.c.ln_2"), nullptr);
  EXPECT_EQ(recorder.find("decode.3.logits"), nullptr);
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
