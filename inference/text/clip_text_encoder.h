// The CLIP text transformer (Hugging Face CLIPTextModel), float32 on the CPU.
//
// Reads a Hugging Face CLIP folder: `config.json` (a CLIPConfig with
// `text_config`, or a CLIPTextConfig) and `model.safetensors` (F32, F16 or
// BF16). Only `text_model.*` tensors are read; the vision tower and the
// projections stay untouched in the memory-mapped file, and the token
// embedding is widened row by row as prompts need it.
//
// Forward pass, as Hugging Face computes last_hidden_state:
//   x = token_embedding[ids] + position_embedding[0..T)
//   per layer:  x += out_proj(attention(layer_norm1(x)))
//               x += fc2(act(fc1(layer_norm2(x))))
//   last_hidden_state = final_layer_norm(x)
// Attention is causal and also ignores keys whose attention_mask is 0, so
// padding positions still get outputs (Cube 3D uses all 77 rows). Masks must
// be ones then zeros, as ClipTokenizer makes them.
//
// Shapes: B = prompts in a batch, T = tokens per prompt (77), C = hidden size.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/text/clip_tokenizer.h"

namespace cubeforge {

class SafetensorsFile;
class TraceSink;

enum class ClipActivation { kQuickGelu, kGelu, kGeluTanh };

struct ClipTextConfig {
  int vocab_size = 49408;
  int hidden_size = 512;
  int intermediate_size = 2048;
  int num_attention_heads = 8;
  int num_hidden_layers = 12;
  int max_position_embeddings = 77;
  float layer_norm_eps = 1e-5f;
  ClipActivation hidden_act = ClipActivation::kQuickGelu;

  // Reads `text_config` of a CLIPConfig (or a bare CLIPTextConfig); missing
  // keys take Hugging Face's CLIPTextConfig defaults.
  static Result<ClipTextConfig> from_json(std::string_view json_text, std::string_view file_name);
};

class ClipTextEncoder {
 public:
  // Reads `clip_dir`/config.json and `clip_dir`/model.safetensors.
  static Result<ClipTextEncoder> load(const std::filesystem::path& clip_dir);
  // From an open weights file (tensors named text_model.*) and a config.
  static Result<ClipTextEncoder> from_safetensors(std::shared_ptr<const SafetensorsFile> weights,
                                                  const ClipTextConfig& config);

  ClipTextEncoder(ClipTextEncoder&&) noexcept;
  ClipTextEncoder& operator=(ClipTextEncoder&&) noexcept;
  ~ClipTextEncoder();

  // last_hidden_state of one tokenised prompt: [T, C] row-major. `trace`
  // receives the named intermediates ("clip.…", inference/tensor/trace.h).
  Result<std::vector<float>> encode(const TokenizedText& tokens, TraceSink* trace = nullptr) const;
  // Several prompts at once (shares the matrix products): [B, T, C].
  Result<std::vector<float>> encode_batch(std::span<const TokenizedText> batch, TraceSink* trace = nullptr) const;

  int hidden_size() const { return config_.hidden_size; }
  const ClipTextConfig& config() const { return config_; }

 private:
  ClipTextEncoder();
  struct Weights;
  ClipTextConfig config_;
  std::unique_ptr<Weights> weights_;
};

}  // namespace cubeforge
