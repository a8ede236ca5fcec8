// The DualStreamRoformer's forward on the CPU: one generation's KV cache
// (gpt_kv_cache.h) and scratch over a loaded model's weights.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "inference/core/result.h"
#include "inference/model/gpt.h"
#include "inference/options/engine_options.h"

namespace cubeforge {

class TraceSink;

// One generation's KV cache and scratch buffers.
class GptSession {
 public:
  // batch: 1 or 2; cond_length: S; max_shape_tokens: BOS + generated tokens.
  // `kv`: how the cache stores and keeps keys and values (gpt_kv_cache.h);
  // options the session cannot run make prefill fail saying why.
  GptSession(const DualStreamGpt& model, int batch, int cond_length, int max_shape_tokens, AttentionMode mode,
             const KvCacheOptions& kv = {});
  ~GptSession();
  GptSession(GptSession&&) noexcept;

  // Clears the cache and runs cond [B, S, d] and shape embeddings [B, L, d]
  // (positions 0..L-1) through the model. Writes the last row's logits [B, V+3].
  // L = 0 runs the condition alone (no logits): block diffusion starts there.
  Status prefill(std::span<const float> cond, std::span<const float> shape_embeddings, int length,
                 std::span<float> logits);

  // Appends one shape position per row: embeddings [B, d] -> logits [B, V+3].
  // The same as evaluate() of one position that sees itself and what precedes it.
  Status decode(std::span<const float> embeddings, std::span<float> logits);

  // Runs `count` shape positions from `first` on in one evaluation:
  // embeddings [B, count, d] -> logits [B, count, V+3]. Every row's keys and
  // values go to its position's cache slot first; then row i sees the
  // condition and the shape slots [0, visible_end[i]): up to itself for
  // autoregressive decoding, up to the end of its block for block diffusion
  // (slots past first + count hold what an earlier evaluation left there).
  // `first` may rewrite cached positions (at most filled()); afterwards the
  // cache holds max(filled(), first + count) positions. Each row's arithmetic
  // is the one-position decode's, bit for bit, however many rows run together:
  // verifying guessed tokens in one evaluation gives exactly the logits that
  // decoding them one by one would. In the reference attention mode every row
  // reproduces the reference's one-token decode (single-stream blocks see
  // slot 0), as decode() does.
  Status evaluate(std::span<const float> embeddings, int first, int count, std::span<const int> visible_end,
                  std::span<float> logits);

  // Forgets the shape positions from `length` on (rejected guesses); later
  // evaluations overwrite their slots.
  Status truncate(int length);

  int batch() const;
  int cond_length() const;
  int capacity() const;  // shape positions the cache can hold
  int filled() const;    // shape positions decoded so far (the cache may hold fewer under a budget)

  // Layer `layer`'s cached keys and values of batch row `row` as float32,
  // [rows, d] each, in slot order (calibrating low-rank bases; tests).
  Status read_cache(int layer, int row, std::vector<float>* keys, std::vector<float>* values) const;
  // Bytes the attention of the next decode step reads from the cache.
  double kv_cache_bytes() const;

  // Names the intermediates of the following prefill, decode and evaluate calls into
  // `sink` (the scheme is in inference/tensor/trace.h); null turns it off.
  void set_trace(TraceSink* sink);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace cubeforge
