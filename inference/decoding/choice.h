// How every strategy reads an evaluation's logits: the codes' logits that
// choose token t, combined with guidance for step t of N exactly as
// generate_tokens combines them, and the confidence of their best code.
#pragma once

#include <chrono>
#include <span>

#include "inference/model/config.h"

namespace cubeforge {

// logits: [R, n, V'] of one evaluation; `position` indexes n. out: [codes].
void choice_logits(std::span<const float> logits, int rows, int count, int position, const GptConfig& config,
                   float guidance_scale, int token_index, int token_count, std::span<float> out);

// The first maximum (greedy decoding's choice) and its softmax probability.
struct CodeChoice {
  int code = 0;
  double confidence = 0;
};
CodeChoice most_likely_code(std::span<const float> logits);

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace cubeforge
