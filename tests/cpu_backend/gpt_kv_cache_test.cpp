// The GPT's KV cache options against the exact cache: a budget the
// generation never reaches and a full-rank orthonormal basis change nothing
// but float32 rounding (attending in the reduced space is exact); eviction
// keeps the condition tokens, BOS and the recent window; the stored forms
// hold the exact cache's rows within their formats' errors; options that
// cannot run say why.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "inference/cpu_backend/gpt_session.h"
#include "inference/model/kv_bases.h"
#include "inference/model/random_weights.h"
#include "tests/support/oracle.h"
#include "tests/support/orthonormal_rows.h"
#include "tests/support/small_gpt.h"

namespace cubeforge {
namespace {

using testing::relative_error;

class GptKvCache : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = random_weights_file(expected_gpt_tensors(testing::small_gpt_config()), 11, DType::kF32, "kv.safetensors");
    ASSERT_TRUE(file.ok());
    auto model = DualStreamGpt::from_file(std::move(*file), testing::small_gpt_config());
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_.emplace(std::move(*model));
  }

  // Prefill (cond + BOS), then `steps` decode steps of fixed tokens, with
  // guidance: every step's logits. The session stays for inspection.
  std::vector<float> run(const KvCacheOptions& kv, int steps, std::optional<GptSession>* keep = nullptr,
                         Status* status = nullptr) {
    const GptConfig& c = model_->config();
    std::vector<float> text(size_t(5 * c.text_width));
    for (size_t i = 0; i < text.size(); ++i) text[i] = float(std::cos(0.37 * double(i)));
    auto cond = model_->project_condition(text, nullptr);
    std::vector<float> rows = *cond;
    for (float v : *cond) rows.push_back(0.5f * v);
    std::optional<GptSession> session;
    session.emplace(*model_, 2, model_->condition_length(5), steps + 1, AttentionMode::kCausal, kv);
    std::vector<float> logits(size_t(2 * c.vocab_size())), all, embedding(size_t(2 * c.width));
    for (int step = 0; step <= steps; ++step) {
      auto row = model_->token_embedding(step == 0 ? c.bos_id() : (step * 13) % c.codes);
      std::copy(row.begin(), row.end(), embedding.begin());
      std::copy(row.begin(), row.end(), embedding.begin() + c.width);
      const Status s = step == 0 ? session->prefill(rows, embedding, 1, logits) : session->decode(embedding, logits);
      if (status) *status = s;
      if (!s.ok()) return {};
      all.insert(all.end(), logits.begin(), logits.end());
    }
    if (keep) keep->emplace(std::move(*session));
    return all;
  }

  std::optional<DualStreamGpt> model_;
};

TEST_F(GptKvCache, UnreachedBudgetChangesOnlyRounding) {
  const auto exact = run({}, 40);
  KvCacheOptions kv;
  kv.budget = 64;  // more than the 41 positions
  const auto budget = run(kv, 40);
  EXPECT_LT(relative_error(budget, exact), 1e-5);
  EXPECT_GT(relative_error(budget, exact), 0.0);  // it did take the other attention path
}

// Rows of a random orthonormal basis [n, n] in float32.
std::vector<float> orthonormal_basis(int n, uint32_t seed) {
  const std::vector<double> rows = testing::orthonormal_rows(n, seed);
  return std::vector<float>(rows.begin(), rows.end());
}

std::filesystem::path write_bases(const GptConfig& c, uint32_t seed) {
  const auto path = std::filesystem::temp_directory_path() / ("cubeforge-kv-bases-" + std::to_string(seed) + ".safetensors");
  std::vector<std::vector<float>> storage;
  std::vector<TensorToWrite> tensors;
  for (int l = 0; l < c.dual_layers + c.single_layers; ++l)
    for (const char* kind : {"keys", "values"}) {
      storage.push_back(orthonormal_basis(c.width, seed + uint32_t(l * 2 + (kind[0] == 'v'))));
      tensors.push_back({"layers." + std::to_string(l) + "." + kind, DType::kF32, {c.width, c.width},
                         std::as_bytes(std::span(storage.back()))});
    }
  EXPECT_TRUE(write_safetensors(path, tensors).ok());
  return path;
}

TEST_F(GptKvCache, FullRankOrthonormalBasisIsExact) {
  const auto path = write_bases(model_->config(), 3);
  auto low_rank = LowRankKv::load(path, model_->config(), model_->config().width);
  ASSERT_TRUE(low_rank.ok()) << low_rank.error().to_string();
  KvCacheOptions kv;
  kv.low_rank = *low_rank;
  const auto exact = run({}, 20);
  std::optional<GptSession> session;
  const auto reduced = run(kv, 20, &session);
  EXPECT_LT(relative_error(reduced, exact), 1e-5);
  // The cache holds latents; read back, they are the keys themselves.
  std::optional<GptSession> exact_session;
  run({}, 20, &exact_session);
  std::vector<float> k, v, k0, v0;
  ASSERT_TRUE(session->read_cache(0, 1, &k, &v).ok());
  ASSERT_TRUE(exact_session->read_cache(0, 1, &k0, &v0).ok());
  EXPECT_LT(relative_error(k, k0), 1e-5);
  EXPECT_LT(relative_error(v, v0), 1e-5);
  // A truncated basis changes the result.
  auto half = LowRankKv::load(path, model_->config(), model_->config().width / 2);
  ASSERT_TRUE(half.ok());
  kv.low_rank = *half;
  EXPECT_GT(relative_error(run(kv, 20), exact), 1e-3);
  // Ranks the file does not hold, and a basis that is not orthonormal.
  EXPECT_FALSE(LowRankKv::load(path, model_->config(), model_->config().width + 1).ok());
  EXPECT_FALSE(LowRankKv::load(path, model_->config(), 0).ok());
  std::filesystem::remove(path);
}

TEST_F(GptKvCache, EvictionKeepsConditionBosAndRecentWindow) {
  KvCacheOptions kv;
  kv.budget = 8;
  std::optional<GptSession> session, exact_session;
  const auto evicted = run(kv, 30, &session);
  run({}, 30, &exact_session);
  ASSERT_FALSE(evicted.empty());
  const int S = session->cond_length(), d = model_->config().width;
  // Layer 0's keys depend on the token alone, so its slots can be matched
  // with the exact cache's rows: cond 0..S-1, then shape positions p at S + p.
  // (Later layers see attention that eviction changed.)
  std::vector<float> k, v, k0, v0;
  ASSERT_TRUE(session->read_cache(0, 0, &k, &v).ok());
  ASSERT_TRUE(exact_session->read_cache(0, 0, &k0, &v0).ok());
  ASSERT_EQ(int(k.size()), (S + 8) * d);
  auto holds = [&](int exact_row) {
    for (int slot = 0; slot < S + 8; ++slot)
      if (std::equal(k.begin() + slot * d, k.begin() + (slot + 1) * d, k0.begin() + exact_row * d)) return true;
    return false;
  };
  for (int i = 0; i < S; ++i) EXPECT_TRUE(holds(i)) << "cond row " << i;
  EXPECT_TRUE(holds(S + 0)) << "BOS";
  for (int p = 30 - 3; p <= 30; ++p) EXPECT_TRUE(holds(S + p)) << "recent position " << p;
  int shape_rows = 0;
  for (int p = 0; p <= 30; ++p) shape_rows += holds(S + p);
  EXPECT_EQ(shape_rows, 8);
  // The single layer holds the budget and no more.
  ASSERT_TRUE(session->read_cache(2, 1, &k, &v).ok());
  EXPECT_EQ(int(k.size()), 8 * d);
  EXPECT_GT(relative_error(evicted, run({}, 30)), 0.0);
}

TEST_F(GptKvCache, StoredFormsHoldTheExactRows) {
  std::optional<GptSession> exact_session;
  const auto exact = run({}, 40, &exact_session);
  for (KvFormat format : {KvFormat::kBF16, KvFormat::kFp8, KvFormat::kInt8}) {
    KvCacheOptions kv;
    kv.format = format;
    std::optional<GptSession> session;
    const auto logits = run(kv, 40, &session);
    ASSERT_FALSE(logits.empty()) << kv_format_name(format);
    // Per-value errors are bounded in tests/cpu; here, that every row lands
    // where the exact cache has it: relative errors of the whole cache at
    // the formats' scale (half a step: bf16 2^-8, fp8 2^-4, int8 1/254 of a
    // block's range), with room for what earlier layers' changed attention
    // does to later layers' rows.
    const double bound = format == KvFormat::kBF16 ? 1e-2 : format == KvFormat::kFp8 ? 6e-2 : 2e-2;
    for (int layer = 0; layer < 3; ++layer) {
      std::vector<float> k, v, k0, v0;
      ASSERT_TRUE(session->read_cache(layer, 1, &k, &v).ok());
      ASSERT_TRUE(exact_session->read_cache(layer, 1, &k0, &v0).ok());
      EXPECT_LT(relative_error(k, k0), bound) << kv_format_name(format) << " layer " << layer;
      EXPECT_LT(relative_error(v, v0), bound) << kv_format_name(format) << " layer " << layer;
    }
    const double error = relative_error(logits, exact);
    EXPECT_GT(error, 0.0) << kv_format_name(format);
    EXPECT_LT(error, bound) << kv_format_name(format);
    EXPECT_LT(session->kv_cache_bytes(), exact_session->kv_cache_bytes() * (format == KvFormat::kBF16 ? 0.51 : 0.3));
  }
}

TEST_F(GptKvCache, OptionsThatCannotRunSayWhy) {
  Status status;
  KvCacheOptions kv;
  kv.format = KvFormat::kInt8;
  kv.budget = 8;
  EXPECT_TRUE(run(kv, 3, nullptr, &status).empty());
  EXPECT_NE(status.error().message.find("INT8"), std::string::npos) << status.error().to_string();
  kv = {};
  kv.budget = 1;
  EXPECT_TRUE(run(kv, 3, nullptr, &status).empty());
  EXPECT_NE(status.error().message.find("give 2 to"), std::string::npos) << status.error().to_string();
  EXPECT_EQ(error_option(status.error()), OptionKey::kKvBudget);
  kv = {};
  kv.format = KvFormat::kFp8;
  GptSession session(*model_, 1, 2, 4, AttentionMode::kReference, kv);
  std::vector<float> cond(size_t(2 * 64)), bos(64), logits(size_t(model_->config().vocab_size()));
  const Status reference = session.prefill(cond, bos, 1, logits);
  ASSERT_FALSE(reference.ok());
  EXPECT_NE(reference.error().message.find("exact KV cache"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
