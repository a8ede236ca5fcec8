// What a decoding strategy asks of a model session, in tokens.
//
// A strategy (sequential, exact parallel, block diffusion) only needs to run
// the condition and a first token, to evaluate several new positions in one
// pass with a visibility per row (causal for autoregressive decoding,
// bidirectional inside a block for block diffusion), and to cut the cache
// back after rejected guesses. This is that interface; CpuDecodingSession is its
// implementation over the CPU GptSession. A token is fed to every row of the
// session (the conditional and, with guidance, the unconditional one).
//
// Shapes: R = rows (2 with guidance, else 1), n = positions evaluated,
// V' = logits per position (codes + specials).
#pragma once

#include <span>
#include <vector>

#include "inference/core/result.h"
#include "inference/model/gpt.h"

namespace cubeforge {

class DecodingSession {
 public:
  virtual ~DecodingSession() = default;

  virtual const GptConfig& config() const = 0;
  virtual int rows() const = 0;
  virtual int capacity() const = 0;  // shape positions (BOS included) the cache holds
  virtual int filled() const = 0;    // shape positions cached now

  // Clears the cache and runs the condition, then `tokens` at positions 0..
  // with causal attention; last_logits [R, V'] are the last position's. With
  // no tokens only the condition runs and there are no logits.
  virtual Status prefill(std::span<const int> tokens, std::span<float> last_logits) = 0;

  // Evaluates `tokens` at positions first, first + 1, ... in one pass
  // (GptSession::evaluate): row i sees the cached positions [0, visible_end[i]).
  // logits: [R, n, V'].
  virtual Status evaluate(int first, std::span<const int> tokens, std::span<const int> visible_end,
                          std::span<float> logits) = 0;

  // Forgets the positions from `length` on.
  virtual Status truncate(int length) = 0;
};

// The CPU implementation: a GptSession, the condition rows, and the token
// embedding table of its model.
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
