// CLIP text configuration: the text tower's sizes read from a Hugging Face
// config.json (kept apart from the encoder so the parser can be fuzzed alone).
// Every number is checked as the encoder keeps it (core/checked_number.h).
#include <nlohmann/json.hpp>

#include "inference/core/checked_number.h"
#include "inference/core/strict_json.h"
#include "inference/core/untrusted_text.h"
#include "inference/text/clip_text_encoder.h"

namespace cubeforge {
namespace {

// Far above any CLIP's sizes; products of two of them still fit 64 bits.
constexpr int kMaxClipSize = 1 << 24;
// layer_norm_eps is added to a variance before a division: a positive normal
// float, below 1 in every real model.
constexpr NumberRange<float> kEpsRange = positive_up_to(1.0f);

template <class T>
Result<T> read_number(const nlohmann::json& config, const char* key, T fallback, const NumberRange<T>& range,
                      std::string_view file) {
  if (!config.contains(key)) return fallback;
  return narrow_json_number<T>(config.at(key), range, {std::string(file), std::string("text_config.") + key});
}

Result<int> read_size(const nlohmann::json& config, const char* key, int fallback, std::string_view file) {
  return read_number<int>(config, key, fallback, positive_up_to(kMaxClipSize), file);
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
  CUBEFORGE_ASSIGN_OR_RETURN(config.vocab_size, read_size(*text, "vocab_size", config.vocab_size, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.hidden_size, read_size(*text, "hidden_size", config.hidden_size, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.intermediate_size,
                             read_size(*text, "intermediate_size", config.intermediate_size, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.num_attention_heads,
                             read_size(*text, "num_attention_heads", config.num_attention_heads, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.num_hidden_layers,
                             read_size(*text, "num_hidden_layers", config.num_hidden_layers, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.max_position_embeddings,
                             read_size(*text, "max_position_embeddings", config.max_position_embeddings, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(config.layer_norm_eps,
                             read_number(*text, "layer_norm_eps", config.layer_norm_eps, kEpsRange, file_name));
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
