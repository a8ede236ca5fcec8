// CLIP text transformer: loading text_model.* weights and the forward pass on
// the CPU backend's ops (inference/cpu/ops.h): BLAS products straight from the
// mapped weights in their stored precision, float32 activations.
#include "inference/text/clip_text_encoder.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "inference/core/file_io.h"
#include "inference/cpu/ops.h"
#include "inference/tensor/safetensors.h"
#include "inference/tensor/trace.h"

namespace cubeforge {
namespace {

constexpr std::string_view kPrefix = "text_model.";

void activate(float* x, int64_t count, ClipActivation activation) {
  switch (activation) {
    case ClipActivation::kQuickGelu: cpu::quick_gelu_inplace(x, count); break;
    case ClipActivation::kGelu: cpu::gelu_erf_inplace(x, count); break;
    case ClipActivation::kGeluTanh:
      for (int64_t i = 0; i < count; ++i) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      }
      break;
  }
}

}  // namespace

struct ClipTextEncoder::Weights {
  // Matrices point into the mapped file, in their stored precision; the small
  // vectors (norms, biases, positions) are widened copies.
  struct Layer {
    std::vector<float> layer_norm1_weight, layer_norm1_bias;  // [C]
    cpu::WeightMatrix q_proj, k_proj, v_proj, out_proj;       // [C, C]
    std::vector<float> q_bias, k_bias, v_bias, out_bias;      // [C]
    std::vector<float> layer_norm2_weight, layer_norm2_bias;  // [C]
    cpu::WeightMatrix fc1;                                    // [I, C]
    std::vector<float> fc1_bias;                              // [I]
    cpu::WeightMatrix fc2;                                    // [C, I]
    std::vector<float> fc2_bias;                              // [C]
  };
  std::shared_ptr<const SafetensorsFile> file;  // keeps the matrices mapped
  cpu::WeightMatrix token_embedding;            // [V, C], rows widened as prompts need them
  std::vector<float> position_embedding;        // [P, C]
  std::vector<Layer> layers;
  std::vector<float> final_layer_norm_weight, final_layer_norm_bias;  // [C]
};

ClipTextEncoder::ClipTextEncoder() = default;
ClipTextEncoder::ClipTextEncoder(ClipTextEncoder&&) noexcept = default;
ClipTextEncoder& ClipTextEncoder::operator=(ClipTextEncoder&&) noexcept = default;
ClipTextEncoder::~ClipTextEncoder() = default;

Result<ClipTextEncoder> ClipTextEncoder::load(const std::filesystem::path& clip_dir) {
  const std::filesystem::path config_path = clip_dir / "config.json";
  CUBEFORGE_ASSIGN_OR_RETURN(std::string config_text, read_file_text(config_path, uint64_t(16) << 20));
  CUBEFORGE_ASSIGN_OR_RETURN(ClipTextConfig config, ClipTextConfig::from_json(config_text, config_path.string()));
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(clip_dir / "model.safetensors"));
  return from_safetensors(std::make_shared<const SafetensorsFile>(std::move(file)), config);
}

Result<ClipTextEncoder> ClipTextEncoder::from_safetensors(std::shared_ptr<const SafetensorsFile> file,
                                                          const ClipTextConfig& config) {
  ClipTextEncoder encoder;
  encoder.config_ = config;
  encoder.weights_ = std::make_unique<Weights>();
  Weights& weights = *encoder.weights_;
  weights.file = file;
  const int64_t hidden = config.hidden_size;
  const int64_t intermediate = config.intermediate_size;

  auto float_tensor = [&](const std::string& name, std::vector<int64_t> shape) -> Result<TensorView> {
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, file->get(std::string(kPrefix) + name, shape));
    if (!dtype_is_float(view.dtype())) {
      return make_error(ErrorCode::kCorruptFile, "'" + file->name() + "': tensor '" + view.name() + "' holds " +
                                                     std::string(dtype_name(view.dtype())) +
                                                     ", expected F32, F16 or BF16 weights");
    }
    CUBEFORGE_TRY(check_finite(view, file->name()));
    return view;
  };
  auto vector = [&](const std::string& name, std::vector<int64_t> shape) -> Result<std::vector<float>> {
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, float_tensor(name, shape));
    std::vector<float> values(size_t(view.element_count()));
    convert_to_f32(view.dtype(), view.data, values.data(), values.size());
    return values;
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) -> Result<cpu::WeightMatrix> {
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, float_tensor(name, {rows, cols}));
    return cpu::WeightMatrix{view.dtype(), view.data, rows, cols};
  };

  CUBEFORGE_ASSIGN_OR_RETURN(weights.token_embedding,
                             matrix("embeddings.token_embedding.weight", config.vocab_size, hidden));
  CUBEFORGE_ASSIGN_OR_RETURN(weights.position_embedding,
                             vector("embeddings.position_embedding.weight", {config.max_position_embeddings, hidden}));

  // The configuration's layer count is a claim: 2^24 layers would allocate
  // gigabytes of empty layers before the first tensor was looked for. Every
  // layer has tensors of its own, so the file bounds the count (which
  // tensors a layer lacks is named below, layer by layer).
  const std::string layer_prefix = std::string(kPrefix) + "encoder.layers.";
  int64_t layer_tensors = 0;
  for (const TensorEntry& entry : file->entries())
    layer_tensors += entry.name.compare(0, layer_prefix.size(), layer_prefix) == 0;
  if (config.num_hidden_layers > layer_tensors)
    return make_error(ErrorCode::kCorruptFile,
                      "the CLIP configuration says num_hidden_layers = " + std::to_string(config.num_hidden_layers) +
                          " but '" + file->name() + "' holds only " + std::to_string(layer_tensors) + " tensors named " +
                          layer_prefix + "*; config.json and model.safetensors must come from the same model");
  weights.layers.resize(size_t(config.num_hidden_layers));
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    Weights::Layer& layer = weights.layers[size_t(l)];
    const std::string p = "encoder.layers." + std::to_string(l) + ".";
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm1_weight, vector(p + "layer_norm1.weight", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm1_bias, vector(p + "layer_norm1.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.q_proj, matrix(p + "self_attn.q_proj.weight", hidden, hidden));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.q_bias, vector(p + "self_attn.q_proj.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.k_proj, matrix(p + "self_attn.k_proj.weight", hidden, hidden));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.k_bias, vector(p + "self_attn.k_proj.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.v_proj, matrix(p + "self_attn.v_proj.weight", hidden, hidden));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.v_bias, vector(p + "self_attn.v_proj.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.out_proj, matrix(p + "self_attn.out_proj.weight", hidden, hidden));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.out_bias, vector(p + "self_attn.out_proj.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm2_weight, vector(p + "layer_norm2.weight", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm2_bias, vector(p + "layer_norm2.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc1, matrix(p + "mlp.fc1.weight", intermediate, hidden));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc1_bias, vector(p + "mlp.fc1.bias", {intermediate}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc2, matrix(p + "mlp.fc2.weight", hidden, intermediate));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc2_bias, vector(p + "mlp.fc2.bias", {hidden}));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(weights.final_layer_norm_weight, vector("final_layer_norm.weight", {hidden}));
  CUBEFORGE_ASSIGN_OR_RETURN(weights.final_layer_norm_bias, vector("final_layer_norm.bias", {hidden}));
  return encoder;
}

Result<std::vector<float>> ClipTextEncoder::encode(const TokenizedText& tokens, TraceSink* trace) const {
  return encode_batch(std::span<const TokenizedText>(&tokens, 1), trace);
}

Result<std::vector<float>> ClipTextEncoder::encode_batch(std::span<const TokenizedText> batch,
                                                         TraceSink* trace) const {
  const ClipTextConfig& cfg = config_;
  const Weights& weights = *weights_;
  if (batch.empty()) return std::vector<float>{};
  const int tokens = int(batch[0].input_ids.size());
  for (size_t b = 0; b < batch.size(); ++b) {
    const TokenizedText& item = batch[b];
    const std::string which = "prompt " + std::to_string(b) + " of the batch";
    if (int(item.input_ids.size()) != tokens || item.attention_mask.size() != item.input_ids.size()) {
      return make_error(ErrorCode::kInvalidArgument,
                        which + ": input_ids and attention_mask must all have the same length (" +
                            std::to_string(tokens) + "); tokenise every prompt with the same ClipTokenizer");
    }
    if (tokens < 1 || tokens > cfg.max_position_embeddings) {
      return make_error(ErrorCode::kInvalidArgument, which + ": " + std::to_string(tokens) +
                                                         " tokens; the text encoder takes 1 to " +
                                                         std::to_string(cfg.max_position_embeddings));
    }
    for (int t = 0; t < tokens; ++t) {
      const int32_t id = item.input_ids[size_t(t)];
      const int32_t mask = item.attention_mask[size_t(t)];
      if (id < 0 || id >= cfg.vocab_size) {
        return make_error(ErrorCode::kInvalidArgument, which + ": token id " + std::to_string(id) +
                                                           " at position " + std::to_string(t) +
                                                           " is outside the vocabulary of " +
                                                           std::to_string(cfg.vocab_size));
      }
      if (mask != 0 && mask != 1) {
        return make_error(ErrorCode::kInvalidArgument,
                          which + ": attention_mask values must be 0 or 1, got " + std::to_string(mask));
      }
    }
    // The tokenizer's masks are ones then zeros. With such a mask, causal
    // attention that also skips padded keys is plain causal attention over
    // the real keys only, which is what the CPU attention op computes.
    const auto first_padding = std::find(item.attention_mask.begin(), item.attention_mask.end(), 0);
    if (first_padding == item.attention_mask.begin() ||
        std::find(first_padding, item.attention_mask.end(), 1) != item.attention_mask.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        which + ": attention_mask must be ones followed by zeros, starting with a one (as "
                                "ClipTokenizer makes it)");
    }
  }

  const int64_t prompts = int64_t(batch.size());
  const int64_t rows = prompts * tokens;
  const int64_t hidden = cfg.hidden_size;
  const int64_t heads = cfg.num_attention_heads;
  const int64_t head_dim = hidden / heads;
  const int64_t intermediate = cfg.intermediate_size;
  const size_t width = size_t(hidden);

  std::vector<float> x(size_t(rows) * width);  // [B*T, C] residual stream
  std::vector<float> normed(x.size());         // [B*T, C]
  std::vector<float> q(x.size()), k(x.size()), v(x.size());  // [B*T, C] each
  std::vector<float> attended(x.size());                     // [B*T, C]
  std::vector<float> mlp(size_t(rows) * size_t(intermediate));  // [B*T, I]

  for (int64_t b = 0; b < prompts; ++b) {
    for (int64_t t = 0; t < tokens; ++t) {
      float* row = x.data() + size_t(b * tokens + t) * width;
      const int64_t id = batch[size_t(b)].input_ids[size_t(t)];
      cpu::widen_rows(weights.token_embedding, id, id + 1, row);
      const float* position = weights.position_embedding.data() + size_t(t) * width;
      for (size_t c = 0; c < width; ++c) row[c] += position[c];
    }
  }
  trace_tensor(trace, "clip.embeddings", x.data(), {prompts, tokens, hidden});

  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const Weights::Layer& layer = weights.layers[l];
    const TracePrefix at{"clip", int(l), {}};
    cpu::layer_norm(x.data(), rows, hidden, cfg.layer_norm_eps, layer.layer_norm1_weight.data(),
                    layer.layer_norm1_bias.data(), normed.data());
    trace_tensor(trace, at, "ln_1", normed.data(), {prompts, tokens, hidden});
    cpu::linear(normed.data(), rows, layer.q_proj, layer.q_bias.data(), q.data());
    cpu::linear(normed.data(), rows, layer.k_proj, layer.k_bias.data(), k.data());
    cpu::linear(normed.data(), rows, layer.v_proj, layer.v_bias.data(), v.data());
    trace_tensor(trace, at, "q", q.data(), {prompts, tokens, hidden});
    trace_tensor(trace, at, "k", k.data(), {prompts, tokens, hidden});
    trace_tensor(trace, at, "v", v.data(), {prompts, tokens, hidden});
    for (int64_t b = 0; b < prompts; ++b) {
      const std::vector<int32_t>& mask = batch[size_t(b)].attention_mask;
      const int64_t real_tokens = std::count(mask.begin(), mask.end(), 1);
      const size_t offset = size_t(b * tokens) * width;
      cpu::attention(q.data() + offset, tokens, hidden, k.data() + offset, v.data() + offset, real_tokens, hidden,
                     heads, head_dim, /*causal_base=*/0, attended.data() + offset, hidden);
    }
    trace_tensor(trace, at, "attn", attended.data(), {prompts, tokens, hidden});
    cpu::linear_accumulate(attended.data(), rows, layer.out_proj, layer.out_bias.data(), x.data());
    trace_tensor(trace, at, "attn_residual", x.data(), {prompts, tokens, hidden});

    cpu::layer_norm(x.data(), rows, hidden, cfg.layer_norm_eps, layer.layer_norm2_weight.data(),
                    layer.layer_norm2_bias.data(), normed.data());
    trace_tensor(trace, at, "ln_2", normed.data(), {prompts, tokens, hidden});
    cpu::linear(normed.data(), rows, layer.fc1, layer.fc1_bias.data(), mlp.data());
    activate(mlp.data(), int64_t(mlp.size()), cfg.hidden_act);
    trace_tensor(trace, at, "mlp_hidden", mlp.data(), {prompts, tokens, intermediate});
    cpu::linear_accumulate(mlp.data(), rows, layer.fc2, layer.fc2_bias.data(), x.data());
    trace_tensor(trace, at, "out", x.data(), {prompts, tokens, hidden});
  }

  std::vector<float> output(x.size());
  cpu::layer_norm(x.data(), rows, hidden, cfg.layer_norm_eps, weights.final_layer_norm_weight.data(),
                  weights.final_layer_norm_bias.data(), output.data());
  trace_tensor(trace, "clip.last_hidden_state", output.data(), {prompts, tokens, hidden});
  return output;
}

}  // namespace cubeforge
