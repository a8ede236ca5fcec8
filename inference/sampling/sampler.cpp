// Guidance combination and seeded token sampling.
#include "inference/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cubeforge {

void combine_guidance(std::span<const float> cond, std::span<const float> uncond, float scale, int step, int steps,
                      std::span<float> combined) {
  const float gamma = scale * float(steps - step) / float(steps);
  for (size_t i = 0; i < combined.size(); ++i) combined[i] = (1.0f + gamma) * cond[i] - gamma * uncond[i];
}

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Xoshiro256::Xoshiro256(uint64_t seed) {
  for (auto& s : state_) s = splitmix64(seed);
}

uint64_t Xoshiro256::next() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double Xoshiro256::uniform() { return double(next() >> 11) * 0x1.0p-53; }

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

void TokenSampler::filtered_distribution(std::span<const float> logits, std::vector<int>* ids,
                                         std::vector<double>* probs) const {
  const int n = int(logits.size());
  ids->resize(size_t(n));
  std::iota(ids->begin(), ids->end(), 0);
  // Descending by logit; ties keep the lower id first.
  std::stable_sort(ids->begin(), ids->end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  if (options_.top_k > 0 && options_.top_k < n) ids->resize(size_t(options_.top_k));
  const double temperature = std::max(1e-6, double(options_.temperature));
  const double max_logit = logits[size_t(ids->front())];
  probs->resize(ids->size());
  double total = 0.0;
  for (size_t i = 0; i < ids->size(); ++i) {
    (*probs)[i] = std::exp((double(logits[size_t((*ids)[i])]) - max_logit) / temperature);
    total += (*probs)[i];
  }
  for (double& p : *probs) p /= total;
  if (options_.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t keep = 0;
    while (keep < probs->size()) {
      cumulative += (*probs)[keep++];
      if (cumulative >= double(options_.top_p)) break;
    }
    ids->resize(keep);
    probs->resize(keep);
    const double kept = std::accumulate(probs->begin(), probs->end(), 0.0);
    for (double& p : *probs) p /= kept;
  }
}

std::vector<int> TokenSampler::support(std::span<const float> logits) const {
  if (options_.greedy) {
    return {int(std::max_element(logits.begin(), logits.end()) - logits.begin())};
  }
  std::vector<int> ids;
  std::vector<double> probs;
  filtered_distribution(logits, &ids, &probs);
  std::sort(ids.begin(), ids.end());
  return ids;
}

int TokenSampler::sample(std::span<const float> logits) {
  if (options_.greedy) return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int> ids;
  std::vector<double> probs;
  filtered_distribution(logits, &ids, &probs);
  const double u = rng_.uniform();
  double cumulative = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cumulative += probs[i];
    if (u < cumulative) return ids[i];
  }
  return ids.back();
}

}  // namespace cubeforge
