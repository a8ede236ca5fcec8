// The CPU backend's decoding session (decoding_session.h): a GptSession over
// the exact KV cache, the condition rows, and the token embedding table of
// its model. TokenBackend::open_decoding_session of the CPU backend opens
// one; a benchmark that times the CPU session alone may make one directly.
#pragma once

#include <span>
#include <vector>

#include "inference/backend/decoding_session.h"
#include "inference/cpu_backend/gpt_session.h"

namespace cubeforge {

class CpuDecodingSession final : public DecodingSession {
 public:
  // cond, uncond: [S, d] each; uncond empty for one row (no guidance).
  // positions: BOS plus the tokens to generate.
  CpuDecodingSession(const DualStreamGpt& model, std::span<const float> cond, std::span<const float> uncond,
                     int positions, AttentionMode mode);

  const GptConfig& config() const override { return model_.config(); }
  int rows() const override { return session_.batch(); }
  int capacity() const override { return session_.capacity(); }
  int filled() const override { return session_.filled(); }
  Status prefill(std::span<const int> tokens, std::span<float> last_logits) override;
  Status evaluate(int first, std::span<const int> tokens, std::span<const int> visible_end,
                  std::span<float> logits) override;
  Status truncate(int length) override { return session_.truncate(length); }

 private:
  // [R, n, d]: every token's embedding, once per row.
  std::vector<float> embeddings(std::span<const int> tokens) const;

  const DualStreamGpt& model_;
  std::vector<float> condition_rows_;  // [R, S, d]
  GptSession session_;
};

}  // namespace cubeforge
