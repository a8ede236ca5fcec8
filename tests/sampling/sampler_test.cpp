// Sampling: seeded reproducibility, and top-k / top-p supports checked
// against a brute-force definition on random logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "inference/sampling/sampler.h"

namespace cubeforge {
namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(gen);
  return v;
}

// Brute force: softmax(logits / T); keep the k most likely; then the smallest
// prefix (by probability) whose renormalised mass reaches p.
std::vector<int> brute_force_support(const std::vector<float>& logits, float temperature, int top_k, float top_p) {
  const int n = int(logits.size());
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  const int k = top_k > 0 ? std::min(top_k, n) : n;
  std::vector<int> kept(order.begin(), order.begin() + k);
  std::vector<double> p(kept.size());
  double total = 0;
  for (size_t i = 0; i < kept.size(); ++i) total += p[i] = std::exp(double(logits[size_t(kept[i])]) / temperature);
  for (auto& x : p) x /= total;
  size_t size = kept.size();
  if (top_p < 1.f) {
    for (size_t m = 1; m <= kept.size(); ++m) {
      double mass = 0;
      for (size_t i = 0; i < m; ++i) mass += p[i];
      if (mass >= top_p) {
        size = m;
        break;
      }
    }
  }
  std::vector<int> support(kept.begin(), kept.begin() + ptrdiff_t(size));
  std::sort(support.begin(), support.end());
  return support;
}

TEST(Sampler, GreedyTakesFirstMaximum) {
  TokenSampler sampler(SamplingOptions{});
  std::vector<float> logits = {0.f, 3.f, 1.f, 3.f};
  EXPECT_EQ(sampler.sample(logits), 1);
}

TEST(Sampler, SupportMatchesBruteForce) {
  for (uint32_t trial = 0; trial < 200; ++trial) {
    auto logits = random_logits(64, trial);
    SamplingOptions options;
    options.greedy = false;
    options.temperature = 0.5f + 0.01f * float(trial % 100);
    options.top_k = trial % 3 == 0 ? 0 : int(1 + trial % 40);
    options.top_p = trial % 4 == 0 ? 1.0f : 0.05f + 0.9f * float(trial % 17) / 17.f;
    TokenSampler sampler(options);
    EXPECT_EQ(sampler.support(logits), brute_force_support(logits, options.temperature, options.top_k, options.top_p))
        << "trial " << trial;
  }
}

TEST(Sampler, SampledTokensStayInSupport) {
  auto logits = random_logits(128, 7);
  SamplingOptions options;
  options.greedy = false;
  options.top_k = 20;
  options.top_p = 0.8f;
  options.seed = 99;
  TokenSampler sampler(options);
  const auto support = sampler.support(logits);
  for (int i = 0; i < 2000; ++i) {
    const int token = sampler.sample(logits);
    EXPECT_TRUE(std::binary_search(support.begin(), support.end(), token));
  }
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  auto logits = random_logits(256, 3);
  auto draw = [&](uint64_t seed) {
    SamplingOptions options;
    options.greedy = false;
    options.seed = seed;
    TokenSampler sampler(options);
    std::vector<int> tokens;
    for (int i = 0; i < 64; ++i) tokens.push_back(sampler.sample(logits));
    return tokens;
  };
  EXPECT_EQ(draw(1234), draw(1234));
  EXPECT_NE(draw(1234), draw(1235));
}

TEST(Sampler, FrequenciesFollowProbabilities) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingOptions options;
  options.greedy = false;
  options.seed = 5;
  TokenSampler sampler(options);
  std::vector<int> counts(3);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++counts[size_t(sampler.sample(logits))];
  EXPECT_NEAR(counts[0] / double(draws), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(draws), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(draws), 0.2, 0.02);
}

TEST(Guidance, ReferenceSchedule) {
  std::vector<float> cond = {1.f, 2.f}, uncond = {0.5f, -1.f}, out(2);
  combine_guidance(cond, uncond, 3.0f, 0, 4, out);  // γ = 3
  EXPECT_FLOAT_EQ(out[0], 4.f * 1.f - 3.f * 0.5f);
  combine_guidance(cond, uncond, 3.0f, 3, 4, out);  // γ = 0.75
  EXPECT_FLOAT_EQ(out[1], 1.75f * 2.f + 0.75f);
}

}  // namespace
}  // namespace cubeforge
