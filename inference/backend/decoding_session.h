// What a parallel decoding strategy asks of a backend, in positions.
//
// Exact parallel decoding (Jacobi) and block diffusion need more of the GPT
// than the token session's one token per step (token_backend.h): to run the
// condition and a first token, to evaluate several new positions in one pass
// with a visibility per row (causal for autoregressive decoding,
// bidirectional inside a block for block diffusion), and to cut the cache
// back after rejected guesses. This is that interface; a backend opens one
// (TokenBackend::open_decoding_session), or refuses to when it cannot
// evaluate several positions at once. A token is fed to every row of the
// session (the conditional and, with guidance, the unconditional one). The
// session keeps the exact KV cache (f32, every position, full rank): the
// strategies' tokens are greedy decoding's only over it.
//
// Shapes: R = rows (2 with guidance, else 1), n = positions evaluated,
// V' = logits per position (codes + specials).
#pragma once

#include <span>

#include "inference/core/result.h"
#include "inference/model/config.h"
#include "inference/options/engine_options.h"

namespace cubeforge {

// What a decoding session is opened for. The rows follow the condition: one
// without an unconditional branch, two with one.
struct DecodingSessionOptions {
  // The strategy the session serves: exact parallel decoding or block
  // diffusion (sequential decoding runs a token session).
  DecodingMode decoding = DecodingMode::kJacobi;
  AttentionMode attention = AttentionMode::kCausal;
  int positions = 0;  // BOS plus the tokens to generate
};

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

  // Evaluates `tokens` at positions first, first + 1, ... in one pass: row i
  // sees the cached positions [0, visible_end[i]). Each row's logits are the
  // ones a one-token step would compute. logits: [R, n, V'].
  virtual Status evaluate(int first, std::span<const int> tokens, std::span<const int> visible_end,
                          std::span<float> logits) = 0;

  // Forgets the positions from `length` on.
  virtual Status truncate(int length) = 0;
};

}  // namespace cubeforge
