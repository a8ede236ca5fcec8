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
#include "inference/model/weight_formats.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

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

}  // namespace cubeforge
