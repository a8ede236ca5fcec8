// The DualStreamRoformer: Cube 3D's autoregressive shape-token decoder.
//
// Two streams share one attention per dual block: the condition (projected
// CLIP text plus an optional bounding-box token) and the shape tokens. All
// cond tokens sit at rotary position 0; shape positions count 0, 1, 2, ...
// (0 is BOS). The last dual block only contributes cond keys/values. Single
// blocks see the shape stream alone.
//
// Shapes: B = batch rows (2 with classifier-free guidance), S = cond tokens,
// L = shape tokens, d = width, V = codes (vocabulary = V + 3 specials).
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/cpu/ops.h"
#include "inference/model/config.h"
#include "inference/model/gpt_kv_cache.h"
#include "inference/model/weight_formats.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

class TraceSink;

class DualStreamGpt {
 public:
  // Loads shape_gpt.safetensors; `config` null infers sizes from the tensors.
  // The tensor set is checked against the configuration. `weights` chooses
  // the format the decode matrices are read in (weight_formats.h).
  static Result<DualStreamGpt> load(const std::filesystem::path& file, const GptConfig* config,
                                    const WeightOptions& weights = {});
  static Result<DualStreamGpt> from_file(SafetensorsFile file, const GptConfig& config,
                                         const WeightOptions& weights = {});
  // The same over a file other models may share (one checkpoint decoded in
  // several weight formats side by side).
  static Result<DualStreamGpt> from_shared_file(std::shared_ptr<const SafetensorsFile> file, const GptConfig& config,
                                                const WeightOptions& weights = {});

  // The matrices one decode step reads (the shape stream and lm_head): the
  // ones the weight formats convert.
  static std::vector<std::string> decode_matrix_names(const GptConfig& config);

  DualStreamGpt(DualStreamGpt&&) noexcept;
  DualStreamGpt& operator=(DualStreamGpt&&) noexcept;
  ~DualStreamGpt();

  const GptConfig& config() const;

  // The load-time step of the reference: rows 0..V-1 of the token embedding
  // become shape_proj(codebook). codebook: [V, shape_embed_dim].
  Status install_codebook(std::span<const float> codebook);

  // cond for one branch: text_proj(text_hidden) followed, when the model uses
  // a bbox, by bbox_proj(xyz) (zeros when `bbox_xyz` is null).
  // text_hidden: [tokens, text_width]. Returns [S, d].
  Result<std::vector<float>> project_condition(std::span<const float> text_hidden, const float* bbox_xyz) const;
  int condition_length(int text_tokens) const { return text_tokens + (config().use_bbox ? 1 : 0); }

  // Row `token` of the token embedding, [d].
  std::span<const float> token_embedding(int token) const;
  std::span<const float> token_embedding_table() const;  // [V + 3, d]

  // The checkpoint's tensors as stored (another backend uploads them from
  // here; they are not the decode matrices when weight_options() converts).
  const SafetensorsFile& tensors() const;
  // A 2-D weight as this model multiplies it: a decode matrix in the format
  // weight_options() chose (converted at load, or quantised in the file),
  // any other matrix as stored. Zero-copy; valid while the model lives.
  Result<cpu::WeightMatrix> matrix(const std::string& name) const;

  // Bytes of weights one decode step reads (shape stream + lm_head), with
  // the scales and offsets of quantised matrices.
  size_t decode_weight_bytes() const;
  const WeightOptions& weight_options() const;
  size_t total_weight_bytes() const;

  struct Weights;
  const Weights& weights() const { return *weights_; }

 private:
  DualStreamGpt() = default;
  std::unique_ptr<Weights> weights_;
};

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
