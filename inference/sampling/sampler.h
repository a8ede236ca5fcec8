// Token selection: classifier-free guidance and seeded sampling.
//
// Greedy picks the first maximum (as torch.argmax). Otherwise, in order:
// temperature, top-k, top-p (nucleus: the smallest set of most likely tokens
// whose probability reaches p, always at least one), then one draw from a
// xoshiro256** stream seeded by the request, so a seed reproduces its tokens
// on every machine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "inference/options/engine_options.h"

namespace cubeforge {

// The reference's guidance schedule at step i of n:
// γ = scale·(n−i)/n, combined = (1+γ)·cond − γ·uncond.
void combine_guidance(std::span<const float> cond, std::span<const float> uncond, float scale, int step, int steps,
                      std::span<float> combined);

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t state_[4];
};

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options);

  // Chooses a token from logits over the vocabulary.
  int sample(std::span<const float> logits);

  // The tokens that sampling can return for these logits (after temperature,
  // top-k, top-p), ascending by id. Exposed for tests.
  std::vector<int> support(std::span<const float> logits) const;

 private:
  // Probabilities over the kept support, in descending order of logit.
  void filtered_distribution(std::span<const float> logits, std::vector<int>* ids, std::vector<double>* probs) const;

  SamplingOptions options_;
  Xoshiro256 rng_;
};

}  // namespace cubeforge
