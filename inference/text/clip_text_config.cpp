// CLIP text configuration: the text tower's sizes read from a Hugging Face
// config.json (kept apart from the encoder so the parser can be fuzzed alone).
#include <nlohmann/json.hpp>

#include "inference/core/strict_json.h"
#include "inference/core/untrusted_text.h"
#include "inference/text/clip_text_encoder.h"

namespace cubeforge {
namespace {

Result<int> read_positive_int(const nlohmann::json& config, const char* key, int fallback, std::string_view file) {
  if (!config.contains(key)) return fallback;
  const nlohmann::json& value = config.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > (int64_t(1) << 24)) {
    return make_error(ErrorCode::kCorruptFile, std::string(file) + ": text_config." + key + " is " + json_excerpt(value) +
                                                   "; expected a positive integer");
  }
  return int(value.get<int64_t>());
}

}  // namespace

Result<ClipTextConfig> ClipTextConfig::from_json(std::string_view json_text, std::string_view file_name) {
  // Strict and depth-bounded: a key given twice is an error, and a value
  // nested without end never reaches the recursive dump() of a message.
  auto parsed = parse_json_strictly(json_text);
  if (!parsed.ok())
    return make_error(ErrorCode::kCorruptFile, std::string(file_name) + ": " + parsed.error().message +
                                                   "; expected a Hugging Face CLIP config.json");
  const nlohmann::json& root = *parsed;
  if (!root.is_object()) {
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
    if (!eps.is_number() || !(eps.get<double>() > 0.0 && eps.get<double>() < 1.0)) {
      return make_error(ErrorCode::kCorruptFile, std::string(file_name) + ": text_config.layer_norm_eps is " +
                                                     json_excerpt(eps) + "; expected a small positive number");
    }
    config.layer_norm_eps = eps.get<float>();
  }
  if (text->contains("hidden_act")) {
    const nlohmann::json& act = text->at("hidden_act");
    const std::string name = act.is_string() ? act.get<std::string>() : json_excerpt(act);
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

}  // namespace cubeforge
