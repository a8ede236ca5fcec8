// CLIP text transformer: loading text_model.* weights and the forward pass.
// Matrix products go through BLAS (cblas_sgemm), which holds 99% of the work;
// attention, layer norms and activations are plain serial loops. They are not
// OpenMP-parallel on purpose: OpenMP's spinning workers compete with BLAS's
// own threads and made a CLIP-L encode three times slower on two cores.
#include "inference/text/clip_text_encoder.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "inference/core/file_io.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {
namespace {

constexpr std::string_view kPrefix = "text_model.";

// y[rows, out] = x[rows, in] · w[out, in]ᵀ + bias[out]
void linear(const float* x, int rows, int in, const std::vector<float>& w, const std::vector<float>& bias, int out,
            float* y) {
  for (int r = 0; r < rows; ++r) std::copy(bias.begin(), bias.end(), y + size_t(r) * size_t(out));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, w.data(), in, 1.0f, y, out);
}

void layer_norm(const float* x, int rows, int width, const std::vector<float>& gain, const std::vector<float>& bias,
                float eps, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + size_t(r) * size_t(width);
    float* out = y + size_t(r) * size_t(width);
    double sum = 0.0;
    for (int i = 0; i < width; ++i) sum += row[i];
    const double mean = sum / width;
    double squares = 0.0;
    for (int i = 0; i < width; ++i) squares += (row[i] - mean) * (row[i] - mean);
    const float inverse_std = float(1.0 / std::sqrt(squares / width + double(eps)));
    for (int i = 0; i < width; ++i) out[i] = float(row[i] - mean) * inverse_std * gain[size_t(i)] + bias[size_t(i)];
  }
}

void activate(float* x, size_t count, ClipActivation activation) {
  switch (activation) {
    case ClipActivation::kQuickGelu:
      for (size_t i = 0; i < count; ++i) x[i] = x[i] / (1.0f + std::exp(-1.702f * x[i]));
      break;
    case ClipActivation::kGelu:
      for (size_t i = 0; i < count; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
      break;
    case ClipActivation::kGeluTanh:
      for (size_t i = 0; i < count; ++i) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      }
      break;
  }
}

Result<int> read_positive_int(const nlohmann::json& config, const char* key, int fallback, std::string_view file) {
  if (!config.contains(key)) return fallback;
  const nlohmann::json& value = config.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > (int64_t(1) << 24)) {
    return make_error(ErrorCode::kCorruptFile, std::string(file) + ": text_config." + key + " is " + value.dump() +
                                                   "; expected a positive integer");
  }
  return int(value.get<int64_t>());
}

}  // namespace

Result<ClipTextConfig> ClipTextConfig::from_json(std::string_view json_text, std::string_view file_name) {
  const nlohmann::json root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return make_error(ErrorCode::kCorruptFile,
                      std::string(file_name) + ": not a JSON object; expected a Hugging Face CLIP config.json");
  }
  // A CLIPConfig nests the text tower's settings; older files call it
  // text_config_dict; a CLIPTextConfig holds them at the top level.
  const nlohmann::json* text = &root;
  for (const char* key : {"text_config", "text_config_dict"}) {
    if (root.contains(key) && root.at(key).is_object()) {
      text = &root.at(key);
      break;
    }
  }
  ClipTextConfig config;
  CUBEFORGE_ASSIGN_OR_RETURN(config.vocab_size, read_positive_int(*text, "vocab_size", config.vocab_size, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.hidden_size, read_positive_int(*text, "hidden_size", config.hidden_size, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.intermediate_size,
                             read_positive_int(*text, "intermediate_size", config.intermediate_size, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.num_attention_heads,
                             read_positive_int(*text, "num_attention_heads", config.num_attention_heads, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.num_hidden_layers,
                             read_positive_int(*text, "num_hidden_layers", config.num_hidden_layers, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.max_position_embeddings,
                             read_positive_int(*text, "max_position_embeddings", config.max_position_embeddings,
                                               file_name));
  if (text->contains("layer_norm_eps")) {
    const nlohmann::json& eps = text->at("layer_norm_eps");
    if (!eps.is_number() || eps.get<double>() <= 0.0) {
      return make_error(ErrorCode::kCorruptFile, std::string(file_name) + ": text_config.layer_norm_eps is " +
                                                     eps.dump() + "; expected a positive number");
    }
    config.layer_norm_eps = eps.get<float>();
  }
  if (text->contains("hidden_act")) {
    const nlohmann::json& act = text->at("hidden_act");
    const std::string name = act.is_string() ? act.get<std::string>() : act.dump();
    if (name == "quick_gelu") {
      config.hidden_act = ClipActivation::kQuickGelu;
    } else if (name == "gelu") {
      config.hidden_act = ClipActivation::kGelu;
    } else if (name == "gelu_new" || name == "gelu_pytorch_tanh") {
      config.hidden_act = ClipActivation::kGeluTanh;
    } else {
      return make_error(ErrorCode::kUnsupported, std::string(file_name) + ": text_config.hidden_act \"" + name +
                                                     "\" is not supported; expected quick_gelu, gelu, gelu_new or "
                                                     "gelu_pytorch_tanh");
    }
  }
  if (config.hidden_size % config.num_attention_heads != 0) {
    return make_error(ErrorCode::kCorruptFile,
                      std::string(file_name) + ": text_config.hidden_size " + std::to_string(config.hidden_size) +
                          " is not divisible by num_attention_heads " + std::to_string(config.num_attention_heads));
  }
  return config;
}

struct ClipTextEncoder::Weights {
  struct Layer {
    std::vector<float> layer_norm1_weight, layer_norm1_bias;  // [C]
    std::vector<float> qkv_weight;                            // [3C, C]: q, k, v stacked
    std::vector<float> qkv_bias;                              // [3C]
    std::vector<float> out_proj_weight, out_proj_bias;        // [C, C], [C]
    std::vector<float> layer_norm2_weight, layer_norm2_bias;  // [C]
    std::vector<float> fc1_weight, fc1_bias;                  // [I, C], [I]
    std::vector<float> fc2_weight, fc2_bias;                  // [C, I], [C]
  };
  std::shared_ptr<const SafetensorsFile> file;  // keeps the token embedding mapped
  TensorView token_embedding;                   // [V, C], any float dtype, widened per row
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
  CUBEFORGE_ASSIGN_OR_RETURN(std::string config_text, read_file_text(config_path));
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

  auto check_float = [&](const TensorView& view) -> Status {
    if (!dtype_is_float(view.dtype())) {
      return make_error(ErrorCode::kCorruptFile, "'" + file->name() + "': tensor '" + view.name() + "' holds " +
                                                     std::string(dtype_name(view.dtype())) +
                                                     ", expected F32, F16 or BF16 weights");
    }
    return ok_status();
  };
  auto read = [&](const std::string& name, std::initializer_list<int64_t> shape) -> Result<std::vector<float>> {
    const std::vector<int64_t> expected(shape);
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, file->get(std::string(kPrefix) + name, expected));
    CUBEFORGE_TRY(check_float(view));
    std::vector<float> values(size_t(view.element_count()));
    convert_to_f32(view.dtype(), view.data, values.data(), values.size());
    return values;
  };

  const std::vector<int64_t> token_shape = {config.vocab_size, hidden};
  CUBEFORGE_ASSIGN_OR_RETURN(weights.token_embedding,
                             file->get(std::string(kPrefix) + "embeddings.token_embedding.weight", token_shape));
  CUBEFORGE_TRY(check_float(weights.token_embedding));
  CUBEFORGE_ASSIGN_OR_RETURN(weights.position_embedding,
                             read("embeddings.position_embedding.weight", {config.max_position_embeddings, hidden}));

  weights.layers.resize(size_t(config.num_hidden_layers));
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    Weights::Layer& layer = weights.layers[size_t(l)];
    const std::string p = "encoder.layers." + std::to_string(l) + ".";
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm1_weight, read(p + "layer_norm1.weight", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm1_bias, read(p + "layer_norm1.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm2_weight, read(p + "layer_norm2.weight", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.layer_norm2_bias, read(p + "layer_norm2.bias", {hidden}));
    for (const char* projection : {"q_proj", "k_proj", "v_proj"}) {
      CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> w, read(p + "self_attn." + projection + ".weight", {hidden, hidden}));
      CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> b, read(p + "self_attn." + projection + ".bias", {hidden}));
      layer.qkv_weight.insert(layer.qkv_weight.end(), w.begin(), w.end());
      layer.qkv_bias.insert(layer.qkv_bias.end(), b.begin(), b.end());
    }
    CUBEFORGE_ASSIGN_OR_RETURN(layer.out_proj_weight, read(p + "self_attn.out_proj.weight", {hidden, hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.out_proj_bias, read(p + "self_attn.out_proj.bias", {hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc1_weight, read(p + "mlp.fc1.weight", {intermediate, hidden}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc1_bias, read(p + "mlp.fc1.bias", {intermediate}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc2_weight, read(p + "mlp.fc2.weight", {hidden, intermediate}));
    CUBEFORGE_ASSIGN_OR_RETURN(layer.fc2_bias, read(p + "mlp.fc2.bias", {hidden}));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(weights.final_layer_norm_weight, read("final_layer_norm.weight", {hidden}));
  CUBEFORGE_ASSIGN_OR_RETURN(weights.final_layer_norm_bias, read("final_layer_norm.bias", {hidden}));
  return encoder;
}

Result<std::vector<float>> ClipTextEncoder::encode(const TokenizedText& tokens) const {
  return encode_batch(std::span<const TokenizedText>(&tokens, 1));
}

Result<std::vector<float>> ClipTextEncoder::encode_batch(std::span<const TokenizedText> batch) const {
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
    // With the causal mask, position 0 sees only itself; it must be attended.
    if (item.attention_mask[0] != 1) {
      return make_error(ErrorCode::kInvalidArgument, which + ": attention_mask[0] is 0; the first token (start of "
                                                             "text) must be attended");
    }
  }

  const int prompts = int(batch.size());
  const int rows = prompts * tokens;
  const int hidden = cfg.hidden_size;
  const int heads = cfg.num_attention_heads;
  const int head_dim = hidden / heads;
  const int intermediate = cfg.intermediate_size;
  const size_t token_row_bytes = size_t(hidden) * dtype_size(weights.token_embedding.dtype());

  std::vector<float> x(size_t(rows) * size_t(hidden));        // [B*T, C] residual stream
  std::vector<float> normed(x.size());                        // [B*T, C]
  std::vector<float> qkv(size_t(rows) * size_t(3 * hidden));  // [B*T, 3C]
  std::vector<float> attended(x.size());                      // [B*T, C]
  std::vector<float> mlp(size_t(rows) * size_t(intermediate));  // [B*T, I]

  for (int b = 0; b < prompts; ++b) {
    for (int t = 0; t < tokens; ++t) {
      float* row = x.data() + (size_t(b) * size_t(tokens) + size_t(t)) * size_t(hidden);
      const size_t id = size_t(batch[size_t(b)].input_ids[size_t(t)]);
      convert_to_f32(weights.token_embedding.dtype(), weights.token_embedding.data + id * token_row_bytes, row,
                     size_t(hidden));
      const float* position = weights.position_embedding.data() + size_t(t) * size_t(hidden);
      for (int c = 0; c < hidden; ++c) row[c] += position[c];
    }
  }

  const float scale = 1.0f / std::sqrt(float(head_dim));
  for (const Weights::Layer& layer : weights.layers) {
    layer_norm(x.data(), rows, hidden, layer.layer_norm1_weight, layer.layer_norm1_bias, cfg.layer_norm_eps,
               normed.data());
    linear(normed.data(), rows, hidden, layer.qkv_weight, layer.qkv_bias, 3 * hidden, qkv.data());

    for (int b = 0; b < prompts; ++b) {
      for (int h = 0; h < heads; ++h) {
        const std::vector<int32_t>& mask = batch[size_t(b)].attention_mask;
        std::vector<float> scores(static_cast<size_t>(tokens));
        const size_t stride = size_t(3 * hidden);
        const float* base = qkv.data() + size_t(b) * size_t(tokens) * stride;
        for (int i = 0; i < tokens; ++i) {
          const float* q = base + size_t(i) * stride + size_t(h * head_dim);
          float largest = -INFINITY;
          for (int j = 0; j <= i; ++j) {
            if (mask[size_t(j)] == 0) continue;
            const float* k = base + size_t(j) * stride + size_t(hidden + h * head_dim);
            float dot = 0.0f;
            for (int d = 0; d < head_dim; ++d) dot += q[d] * k[d];
            scores[size_t(j)] = dot * scale;
            largest = std::max(largest, scores[size_t(j)]);
          }
          float total = 0.0f;
          for (int j = 0; j <= i; ++j) {
            if (mask[size_t(j)] == 0) continue;
            scores[size_t(j)] = std::exp(scores[size_t(j)] - largest);
            total += scores[size_t(j)];
          }
          float* out = attended.data() + (size_t(b) * size_t(tokens) + size_t(i)) * size_t(hidden) +
                       size_t(h * head_dim);
          std::fill(out, out + head_dim, 0.0f);
          for (int j = 0; j <= i; ++j) {
            if (mask[size_t(j)] == 0) continue;
            const float weight = scores[size_t(j)] / total;
            const float* v = base + size_t(j) * stride + size_t(2 * hidden + h * head_dim);
            for (int d = 0; d < head_dim; ++d) out[d] += weight * v[d];
          }
        }
      }
    }

    // x += out_proj(attended): beta = 1 accumulates into the residual.
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + size_t(r) * size_t(hidden);
      for (int c = 0; c < hidden; ++c) row[c] += layer.out_proj_bias[size_t(c)];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, hidden, hidden, 1.0f, attended.data(), hidden,
                layer.out_proj_weight.data(), hidden, 1.0f, x.data(), hidden);

    layer_norm(x.data(), rows, hidden, layer.layer_norm2_weight, layer.layer_norm2_bias, cfg.layer_norm_eps,
               normed.data());
    linear(normed.data(), rows, hidden, layer.fc1_weight, layer.fc1_bias, intermediate, mlp.data());
    activate(mlp.data(), mlp.size(), cfg.hidden_act);
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + size_t(r) * size_t(hidden);
      for (int c = 0; c < hidden; ++c) row[c] += layer.fc2_bias[size_t(c)];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, hidden, intermediate, 1.0f, mlp.data(), intermediate,
                layer.fc2_weight.data(), intermediate, 1.0f, x.data(), hidden);
  }

  std::vector<float> output(x.size());
  layer_norm(x.data(), rows, hidden, weights.final_layer_norm_weight, weights.final_layer_norm_bias,
             cfg.layer_norm_eps, output.data());
  return output;
}

}  // namespace cubeforge
