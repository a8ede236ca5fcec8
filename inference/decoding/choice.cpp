// Reading an evaluation's logits: guidance and the best code.
#include "inference/decoding/choice.h"

#include <algorithm>
#include <cmath>

#include "inference/sampling/sampler.h"

namespace cubeforge {

void choice_logits(std::span<const float> logits, int rows, int count, int position, const GptConfig& config,
                   float guidance_scale, int token_index, int token_count, std::span<float> out) {
  const size_t vocabulary = size_t(config.vocab_size()), codes = size_t(config.codes);
  std::span<const float> cond = logits.subspan(size_t(position) * vocabulary, codes);
  if (rows == 2) {
    std::span<const float> uncond = logits.subspan((size_t(count) + size_t(position)) * vocabulary, codes);
    combine_guidance(cond, uncond, guidance_scale, token_index, token_count, out);
  } else {
    std::copy(cond.begin(), cond.end(), out.begin());
  }
}

CodeChoice most_likely_code(std::span<const float> logits) {
  // std::max_element keeps the first maximum, as TokenSampler's greedy choice.
  const auto best = std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (float v : logits) total += std::exp(double(v) - double(*best));
  return {int(best - logits.begin()), 1.0 / total};
}

}  // namespace cubeforge
