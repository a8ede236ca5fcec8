// Low-rank KV bases from calibration: the eigen solver recovers a matrix
// built from known eigenvectors; rows that span a known subspace give a
// basis that reproduces them; on a model's cache, what a rank leaves out is
// the tail of the spectrum (Eckart–Young), and the written full-rank file
// decodes as the exact cache does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>

#include "inference/cpu_backend/gpt_session.h"
#include "inference/cpu_backend/kv_calibration.h"
#include "inference/model/kv_bases.h"
#include "inference/model/random_weights.h"
#include "tests/support/oracle.h"
#include "tests/support/orthonormal_rows.h"
#include "tests/support/small_gpt.h"

namespace cubeforge {
namespace {

using testing::relative_error;

GptConfig calibration_config() { return testing::small_gpt_config(32); }

using testing::orthonormal_rows;

TEST(KvCalibration, EigenSolverRecoversAKnownDecomposition) {
  const int n = 12;
  const auto q = orthonormal_rows(n, 7);
  std::vector<double> lambda(n);
  for (int i = 0; i < n; ++i) lambda[size_t(i)] = double((i * 5) % n) + 0.5;  // distinct, unsorted
  std::vector<double> a(size_t(n * n), 0.0);
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) a[size_t(i * n + j)] += lambda[size_t(k)] * q[size_t(k * n + i)] * q[size_t(k * n + j)];
  std::vector<double> values, vectors;
  symmetric_eigen(a, n, &values, &vectors);
  std::vector<double> sorted = lambda;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(values[size_t(i)], sorted[size_t(i)], 1e-10) << i;
    // The eigenvector of that eigenvalue: a row of q, up to sign.
    const int k = int(std::find(lambda.begin(), lambda.end(), sorted[size_t(i)]) - lambda.begin());
    double dot = 0;
    for (int c = 0; c < n; ++c) dot += vectors[size_t(i * n + c)] * q[size_t(k * n + c)];
    EXPECT_NEAR(std::fabs(dot), 1.0, 1e-10) << i;
  }
}

TEST(KvCalibration, RowsInASubspaceAreReproducedAtItsRank) {
  GptConfig c = calibration_config();
  const int n = c.width, layers = c.dual_layers + c.single_layers;
  KvCalibration calibration(c);
  const auto directions = orthonormal_rows(n, 3);  // keys in its first 3 rows, values in its last 5
  std::mt19937 gen(1);
  std::normal_distribution<double> normal;
  std::vector<float> keys, values;
  for (int r = 0; r < 50; ++r)
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<double> row(size_t(n), 0.0);
      const int first = kind == 0 ? 0 : n - 5, count = kind == 0 ? 3 : 5;
      for (int v = first; v < first + count; ++v) {
        const double w = normal(gen) * double(v + 1);
        for (int i = 0; i < n; ++i) row[size_t(i)] += w * directions[size_t(v * n + i)];
      }
      (kind == 0 ? keys : values).insert((kind == 0 ? keys : values).end(), row.begin(), row.end());
    }
  for (int l = 0; l < layers; ++l) calibration.add_rows(l, keys, values);
  EXPECT_EQ(calibration.rows(), 50);
  auto bases = calibration.bases(5);
  ASSERT_TRUE(bases.ok()) << bases.error().to_string();
  ASSERT_EQ(int(bases->size()), layers);
  const KvLayerBasis& b = (*bases)[1];
  EXPECT_NEAR(energy_kept(b.key_spectrum, 3), 1.0, 1e-9);
  EXPECT_LT(energy_kept(b.key_spectrum, 2), 0.99);
  EXPECT_NEAR(energy_kept(b.value_spectrum, 5), 1.0, 1e-9);
  // Orthonormal rows, and projecting onto the first 3 (5) reproduces every row.
  for (const auto* basis : {&b.keys, &b.values}) {
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) {
        double dot = 0;
        for (int c2 = 0; c2 < n; ++c2) dot += double((*basis)[size_t(i * n + c2)]) * (*basis)[size_t(j * n + c2)];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5);
      }
  }
  auto project = [&](const std::vector<float>& rows, const std::vector<float>& basis, int rank) {
    std::vector<float> out(rows.size(), 0.f);
    for (size_t r = 0; r < rows.size() / size_t(n); ++r)
      for (int i = 0; i < rank; ++i) {
        double dot = 0;
        for (int c2 = 0; c2 < n; ++c2) dot += double(rows[r * size_t(n) + size_t(c2)]) * basis[size_t(i * n + c2)];
        for (int c2 = 0; c2 < n; ++c2) out[r * size_t(n) + size_t(c2)] += float(dot * basis[size_t(i * n + c2)]);
      }
    return out;
  };
  EXPECT_LT(relative_error(project(keys, b.keys, 3), keys), 1e-5);
  EXPECT_LT(relative_error(project(values, b.values, 5), values), 1e-5);
  EXPECT_GT(relative_error(project(values, b.values, 4), values), 1e-2);
  EXPECT_FALSE(calibration.bases(n + 1).ok());
  EXPECT_FALSE(KvCalibration(c).bases(4).ok());  // nothing added
}

class KvCalibrationOnModel : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = random_weights_file(expected_gpt_tensors(calibration_config()), 17, DType::kF32, "calibration.safetensors");
    ASSERT_TRUE(file.ok());
    auto model = DualStreamGpt::from_file(std::move(*file), calibration_config());
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_.emplace(std::move(*model));
  }

  // Prefill of the condition, BOS and `steps` fixed tokens; then `steps`
  // decode steps more: every decode step's logits.
  std::vector<float> run(const KvCacheOptions& kv, int steps, std::optional<GptSession>* keep = nullptr) {
    const GptConfig& c = model_->config();
    std::vector<float> text(size_t(4 * c.text_width));
    for (size_t i = 0; i < text.size(); ++i) text[i] = float(std::sin(0.61 * double(i)));
    auto cond = model_->project_condition(text, nullptr);
    std::vector<float> rows = *cond;
    for (float v : *cond) rows.push_back(-0.7f * v);
    std::optional<GptSession> session;
    session.emplace(*model_, 2, model_->condition_length(4), steps + 1, AttentionMode::kCausal, kv);
    std::vector<float> logits(size_t(2 * c.vocab_size())), all, embedding(size_t(2 * c.width));
    for (int step = 0; step <= steps; ++step) {
      auto row = model_->token_embedding(step == 0 ? c.bos_id() : (step * 7) % c.codes);
      std::copy(row.begin(), row.end(), embedding.begin());
      std::copy(row.begin(), row.end(), embedding.begin() + c.width);
      const Status s = step == 0 ? session->prefill(rows, embedding, 1, logits) : session->decode(embedding, logits);
      EXPECT_TRUE(s.ok()) << s.error().to_string();
      all.insert(all.end(), logits.begin(), logits.end());
    }
    if (keep) keep->emplace(std::move(*session));
    return all;
  }

  std::optional<DualStreamGpt> model_;
};

TEST_F(KvCalibrationOnModel, RankLeavesOutTheSpectrumTailAndFullRankIsExact) {
  const GptConfig& c = model_->config();
  std::optional<GptSession> session;
  const auto exact = run({}, 24, &session);
  KvCalibration calibration(c);
  ASSERT_TRUE(calibration.add(*session).ok());
  EXPECT_EQ(calibration.rows(), 2 * (model_->condition_length(4) + 25));
  auto bases = calibration.bases(c.width);
  ASSERT_TRUE(bases.ok());
  // Eckart–Young: projecting the layer's rows onto the first 8 vectors
  // leaves exactly the spectrum's tail.
  std::vector<float> k0, v0, k1, v1;
  ASSERT_TRUE(session->read_cache(2, 0, &k0, &v0).ok());
  ASSERT_TRUE(session->read_cache(2, 1, &k1, &v1).ok());
  k0.insert(k0.end(), k1.begin(), k1.end());
  const KvLayerBasis& layer = (*bases)[2];
  const int n = c.width, rank = 8;
  double residual = 0, total = 0;
  for (size_t r = 0; r < k0.size() / size_t(n); ++r) {
    std::vector<double> projected(size_t(n), 0.0);
    for (int i = 0; i < rank; ++i) {
      double dot = 0;
      for (int x = 0; x < n; ++x) dot += double(k0[r * size_t(n) + size_t(x)]) * layer.keys[size_t(i * n + x)];
      for (int x = 0; x < n; ++x) projected[size_t(x)] += dot * layer.keys[size_t(i * n + x)];
    }
    for (int x = 0; x < n; ++x) {
      const double value = k0[r * size_t(n) + size_t(x)];
      residual += (value - projected[size_t(x)]) * (value - projected[size_t(x)]);
      total += value * value;
    }
  }
  EXPECT_NEAR(residual / total, 1.0 - energy_kept(layer.key_spectrum, rank), 1e-5);
  EXPECT_GT(residual / total, 1e-3);  // the rank does leave something out
  // The written file at full rank decodes as the exact cache does.
  const auto path = std::filesystem::temp_directory_path() / "cubeforge-kv-calibration-test.safetensors";
  ASSERT_TRUE(write_kv_bases(path, *bases, c.width).ok());
  auto low_rank = LowRankKv::load(path, c, c.width);
  ASSERT_TRUE(low_rank.ok()) << low_rank.error().to_string();
  KvCacheOptions kv;
  kv.low_rank = *low_rank;
  EXPECT_LT(relative_error(run(kv, 24), exact), 1e-5);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace cubeforge
