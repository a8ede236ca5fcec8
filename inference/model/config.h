// Model configuration for Cube 3D checkpoints.
//
// Read from the reference's config.yaml when the model folder has one (same
// keys as its open_model_v0.5.yaml), otherwise inferred from tensor names and
// shapes. Either way it is checked against the tensors: a YAML that disagrees
// with the weights is an error that names the key and the tensor.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inference/core/result.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

// DualStreamRoformer (the GPT).
struct GptConfig {
  int dual_layers = 0;       // n_layer: dual-stream blocks (the last is cond_pre_only)
  int single_layers = 0;     // n_single_layer
  int heads = 0;             // n_head
  int width = 0;             // n_embd
  float rope_theta = 10000.f;
  bool bias = true;          // bias in c_v, c_proj, MLPs, text_proj
  float eps = 1e-6f;         // LayerNorm eps
  int codes = 0;             // shape_model_vocab_size (V)
  int shape_embed_dim = 0;   // shape_model_embed_dim
  int text_width = 0;        // text_model_embed_dim
  bool use_pooled_text_embed = false;
  bool use_bbox = false;
  bool encoder_with_cls_token = true;
  // A block-diffusion model (gpt_model.block_diffusion: block_size,
  // mask_token_id): the same tensors, decoded block by block with masked
  // inputs and bidirectional attention inside a block (inference/decoding/).
  // 0 for an autoregressive model; no tensor tells the two apart.
  int diffusion_block_size = 0;
  int mask_token_id = -1;
  // gpt_model.block_diffusion.threshold: the confidence threshold the model
  // was measured to decode well at, the default of DiffusionOptions; 0 when
  // the config names none.
  float diffusion_threshold = 0.f;
  // gpt_model.guidance_scale: the classifier-free guidance scale the model was
  // measured to draw best at, what a generation that leaves guidance to the
  // model runs at; none when the config names none (the reference's scale).
  std::optional<float> guidance_scale;

  bool block_diffusion() const { return diffusion_block_size > 0; }
  int head_dim() const { return heads > 0 ? width / heads : 0; }
  int vocab_size() const { return codes + 3; }
  int bos_id() const { return codes; }
  int eos_id() const { return codes + 1; }
  int padding_id() const { return codes + 2; }
};

// OneDAutoEncoder (the shape tokenizer).
struct ShapeModelConfig {
  int latents = 0;                // num_encoder_latents: tokens per shape
  int decoder_latents = 0;        // num_decoder_latents (0 in released models)
  int embed_dim = 0;              // codebook vector size
  int width = 0;
  int heads = 0;
  int out_dim = 1;
  float eps = 1e-6f;
  int num_freqs = 0;
  int point_feats = 0;            // extra per-point features (normals: 3)
  bool embed_point_feats = false;
  int encoder_layers = 0;
  std::vector<int> encoder_cross_attention_levels;
  int decoder_layers = 0;
  bool encoder_with_cls_token = true;
  int codes = 0;                  // num_codes

  int head_dim() const { return heads > 0 ? width / heads : 0; }
  int fourier_dim() const { return 3 * (2 * num_freqs + 1); }
};

struct ModelConfig {
  GptConfig gpt;
  ShapeModelConfig shape;
  std::string text_model_name;  // text_model_pretrained_model_name_or_path
};

// Parses a reference-format YAML file (a regular file of at most 16 MiB), or
// its text; `file` names it in errors.
Result<ModelConfig> parse_model_config_yaml(const std::filesystem::path& path);
Result<ModelConfig> parse_model_config_yaml_text(std::string_view text, const std::string& file);

// Infers every size the tensors determine. Values no tensor carries (eps,
// rope_theta) keep the reference defaults. Layer counts come from the layer
// numbers the file holds, which must run from 0 without gaps, so they can
// never exceed what the file holds.
Result<GptConfig> infer_gpt_config(const SafetensorsFile& gpt);
Result<ShapeModelConfig> infer_shape_config(const SafetensorsFile& shape);

// Checks a configuration against tensors: every size must agree (for the
// GPT, the sizes; loading it checks the whole tensor set).
Status check_gpt_config(const GptConfig& config, const SafetensorsFile& gpt, const std::string& config_name);
Status check_shape_config(const ShapeModelConfig& config, const SafetensorsFile& shape,
                          const std::string& config_name);

// The exact tensor names (and shapes) a configuration implies, for
// missing/unexpected checks and for random-weight models.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<DType> dtype;  // unset: any float type (F32, F16, BF16)
};
std::vector<ExpectedTensor> expected_gpt_tensors(const GptConfig& config);
std::vector<ExpectedTensor> expected_shape_tensors(const ShapeModelConfig& config);

// Errors listing missing and unexpected tensors, and shape mismatches; when
// the set is right, an error for the first tensor holding NaN or infinity.
Status check_tensor_set(const SafetensorsFile& file, const std::vector<ExpectedTensor>& expected);

}  // namespace cubeforge
