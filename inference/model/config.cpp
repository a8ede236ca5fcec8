// Model configuration: YAML parsing, inference from tensors, and checks.
#include "inference/model/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "inference/core/checked_number.h"
#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"
#include "inference/options/engine_options.h"

namespace cubeforge {

namespace {

constexpr uint64_t kMaxConfigBytes = 16u << 20;  // a config.yaml is a page of text

// About half the tensors of the smallest layer of each kind (a GPT's last dual
// block without biases has 11, a single block 8, a shape block 12): far below
// any real layer, far above a stray name.
constexpr int kMinTensorsPerDualBlock = 5;
constexpr int kMinTensorsPerSingleBlock = 4;
constexpr int kMinTensorsPerShapeBlock = 6;

// What the numbers of a config.yaml may be, as the engine keeps them
// (checked after narrowing, core/checked_number.h). Counts of layers and
// heads and the widths stay far below what an int's products overflow at;
// sizes match size_from_shape's bound; eps is added to a variance before a
// division and rope_theta is raised to fractional powers: positive normal floats.
constexpr int kMaxLayersOrWidth = 1 << 20;
constexpr int kMaxSize = 1 << 24;
constexpr NumberRange<int> kLayersOrWidth = positive_up_to(kMaxLayersOrWidth);
constexpr NumberRange<int> kOptionalLayers{0, kMaxLayersOrWidth};
constexpr NumberRange<int> kSize = positive_up_to(kMaxSize);
constexpr NumberRange<int> kOptionalSize{0, kMaxSize};
constexpr NumberRange<float> kEps = positive_up_to(1.0f);
constexpr NumberRange<float> kProbability = positive_up_to(1.0f);
constexpr NumberRange<float> kGuidanceScale{0.0f, kMaxGuidance};
constexpr NumberRange<float> kRopeTheta = positive_up_to(std::numeric_limits<float>::max());

std::string key_path(const std::string& section, const std::string& key) { return section + "." + key; }

Status missing_key(const std::string& file, const std::string& section, const std::string& key) {
  return make_error(ErrorCode::kCorruptFile, "'" + file + "': missing key '" + key_path(section, key) +
                                                 "'; add it or remove the file to infer sizes from the weights");
}

// Flags and lists.
template <class T>
Status read_key(const YAML::Node& section_node, const std::string& section, const std::string& key, T* out,
                const std::string& file, bool required) {
  const YAML::Node node = section_node[key];
  if (!node) return required ? missing_key(file, section, key) : ok_status();
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    return make_error(ErrorCode::kCorruptFile, "'" + file + "': key '" + key_path(section, key) +
                                                   "' has an invalid value '" + YAML::Dump(node) + "'");
  }
  return ok_status();
}

// Numbers: read as written, narrowed to the field's type and checked there.
template <class T>
Status read_number(const YAML::Node& section_node, const std::string& section, const std::string& key, T* out,
                   const std::string& file, bool required, const NumberRange<T>& range) {
  const YAML::Node node = section_node[key];
  if (!node) return required ? missing_key(file, section, key) : ok_status();
  const NumberSource source{file, key_path(section, key)};
  if (!node.IsScalar())
    return number_detail::refused(source, YAML::Dump(node), "is not a number", number_detail::accepted(range));
  CUBEFORGE_ASSIGN_OR_RETURN(*out, narrow_number_text<T>(node.Scalar(), range, source));
  return ok_status();
}

// The number of layers named "<prefix><N>.<...>": the highest N plus one, read
// from the names the file holds, never from a claim. Every number below the
// highest must be present, with at least `min_tensors` tensors each (about half
// of what the smallest real layer of that kind has), so the count is bounded by
// the file: a stray "...blocks.999999.x" is an error in one pass over the names,
// not a million layers' worth of expected names later.
Result<int> count_layers(const SafetensorsFile& file, const std::string& prefix, int min_tensors) {
  std::map<int, int> tensors_per_layer;
  std::map<int, const std::string*> example;
  for (const auto& e : file.entries()) {
    if (e.name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t end = e.name.find('.', prefix.size());
    if (end == std::string::npos) continue;
    const std::string_view digits = std::string_view(e.name).substr(prefix.size(), end - prefix.size());
    // Longer numbers (and other names) are left to the tensor-set check, which calls them unexpected.
    if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    const int layer = std::stoi(std::string(digits));
    ++tensors_per_layer[layer];
    example.emplace(layer, &e.name);
  }
  if (tensors_per_layer.empty()) return 0;
  const int count = tensors_per_layer.rbegin()->first + 1;
  const std::string kind = prefix.substr(0, prefix.size() - 1);
  int expected_layer = 0;
  for (const auto& [layer, tensors] : tensors_per_layer) {
    if (layer != expected_layer)
      return make_error(ErrorCode::kCorruptFile,
                        "'" + file.name() + "' has tensor '" +
                            readable_untrusted(*example[tensors_per_layer.rbegin()->first]) + "' (layer " + std::to_string(count - 1) + " of " + kind + ") but no layer " +
                            std::to_string(expected_layer) +
                            "; layers are numbered from 0 without gaps. The file is damaged or not a Cube 3D "
                            "checkpoint");
    if (tensors < min_tensors)
      return make_error(ErrorCode::kCorruptFile,
                        "'" + file.name() + "' has " + std::to_string(tensors) + " tensor(s) in layer " +
                            std::to_string(layer) + " of " + kind + " (such as '" +
                            readable_untrusted(*example[layer]) + "'); a layer of this kind has at least " + std::to_string(min_tensors) +
                            ". The file is damaged or not a Cube 3D checkpoint");
    ++expected_layer;
  }
  return count;
}

// A size read off a tensor shape, where the code keeps it in an int.
Result<int> size_from_shape(const SafetensorsFile& file, const std::string& what, int64_t value) {
  if (value <= 0 || value > (int64_t(1) << 24))
    return make_error(ErrorCode::kCorruptFile, "'" + file.name() + "': " + what + " is " + std::to_string(value) +
                                                   ", outside 1.." + std::to_string(1 << 24));
  return int(value);
}

Result<std::vector<int64_t>> shape_of(const SafetensorsFile& file, const std::string& tensor) {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, file.get(tensor));
  return view.shape();
}

Error mismatch(const std::string& config_name, const std::string& key, long long config_value,
               const std::string& tensor_file, const std::string& what, long long tensor_value) {
  return make_error(ErrorCode::kCorruptFile,
                    "'" + config_name + "' says " + key + " = " + std::to_string(config_value) + " but '" +
                        tensor_file + "' has " + what + " = " + std::to_string(tensor_value) +
                        "; the configuration does not belong to these weights");
}

void add(std::vector<ExpectedTensor>& list, std::string name, std::vector<int64_t> shape) {
  list.push_back({std::move(name), std::move(shape), std::nullopt});
}

void add_linear(std::vector<ExpectedTensor>& list, const std::string& prefix, int64_t out, int64_t in, bool bias) {
  add(list, prefix + ".weight", {out, in});
  if (bias) add(list, prefix + ".bias", {out});
}

// YAML, like JSON, resolves a key given twice to one of its values without a
// word (yaml-cpp: the first); a config.yaml that says n_embd twice is
// ambiguous, so it is refused, at every level. The walk is iterative, and
// bounded by the text's size: aliases could make a small document a very
// wide graph to walk.
Status check_unique_keys(const YAML::Node& root, const std::string& file, size_t text_size) {
  struct Pending {
    YAML::Node node;
    std::string path;
  };
  std::vector<Pending> pending = {{root, ""}};
  uint64_t visited = 0;
  const uint64_t most = 4 * uint64_t(text_size) + 1024;
  while (!pending.empty()) {
    Pending item = std::move(pending.back());
    pending.pop_back();
    if (++visited > most)
      return make_error(ErrorCode::kCorruptFile, "'" + file + "': its aliases expand to more than " + std::to_string(most) +
                                                     " nodes; a configuration needs none of that");
    if (item.node.IsSequence()) {
      size_t index = 0;
      for (const YAML::Node& element : item.node) pending.push_back({element, item.path + "[" + std::to_string(index++) + "]"});
    } else if (item.node.IsMap()) {
      std::map<std::string, int> lines;  // scalar key -> its line
      for (auto it = item.node.begin(); it != item.node.end(); ++it) {
        const std::string path = item.path.empty() ? it->first.as<std::string>("?") : item.path + "." + it->first.as<std::string>("?");
        if (it->first.IsScalar()) {
          const int line = it->first.Mark().line + 1;
          auto [previous, inserted] = lines.emplace(it->first.Scalar(), line);
          if (!inserted)
            return make_error(ErrorCode::kCorruptFile,
                              "'" + file + "': key '" + path + "' is given twice (lines " + std::to_string(previous->second) +
                                  " and " + std::to_string(line) +
                                  "); a YAML mapping holds each key once: keep the one you mean");
        }
        pending.push_back({it->second, path});
      }
    }
  }
  return ok_status();
}

}  // namespace

Result<ModelConfig> parse_model_config_yaml(const std::filesystem::path& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(path, kMaxConfigBytes));
  return parse_model_config_yaml_text(text, path.string());
}

Result<ModelConfig> parse_model_config_yaml_text(std::string_view text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kCorruptFile, "'" + file + "' is not valid YAML: " + e.what());
  }
  if (!root.IsMap()) return make_error(ErrorCode::kCorruptFile, "'" + file + "' is not a YAML mapping");
  CUBEFORGE_TRY(check_unique_keys(root, file, text.size()));
  const YAML::Node gpt = root["gpt_model"];
  const YAML::Node shape = root["shape_model"];
  if (!gpt || !gpt.IsMap()) return make_error(ErrorCode::kCorruptFile, "'" + file + "' has no 'gpt_model' section");
  if (!shape || !shape.IsMap())
    return make_error(ErrorCode::kCorruptFile, "'" + file + "' has no 'shape_model' section");

  ModelConfig config;
  GptConfig& g = config.gpt;
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "n_layer", &g.dual_layers, file, true, kLayersOrWidth));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "n_single_layer", &g.single_layers, file, false, kOptionalLayers));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "rope_theta", &g.rope_theta, file, false, kRopeTheta));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "n_head", &g.heads, file, true, kLayersOrWidth));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "n_embd", &g.width, file, true, kLayersOrWidth));
  CUBEFORGE_TRY(read_key(gpt, "gpt_model", "bias", &g.bias, file, false));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "eps", &g.eps, file, false, kEps));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "shape_model_vocab_size", &g.codes, file, true, kSize));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "shape_model_embed_dim", &g.shape_embed_dim, file, true, kSize));
  CUBEFORGE_TRY(read_number(gpt, "gpt_model", "text_model_embed_dim", &g.text_width, file, true, kSize));
  CUBEFORGE_TRY(read_key(gpt, "gpt_model", "use_pooled_text_embed", &g.use_pooled_text_embed, file, false));
  CUBEFORGE_TRY(read_key(gpt, "gpt_model", "encoder_with_cls_token", &g.encoder_with_cls_token, file, false));
  CUBEFORGE_TRY(read_key(gpt, "gpt_model", "use_bbox", &g.use_bbox, file, false));
  if (gpt["guidance_scale"]) {
    float guidance = 0.f;
    CUBEFORGE_TRY(read_number(gpt, "gpt_model", "guidance_scale", &guidance, file, true, kGuidanceScale));
    g.guidance_scale = guidance;
  }
  if (const YAML::Node diffusion = gpt["block_diffusion"]) {
    const std::string section = "gpt_model.block_diffusion";
    if (!diffusion.IsMap()) return make_error(ErrorCode::kCorruptFile, "'" + file + "': " + section + " is not a mapping");
    CUBEFORGE_TRY(read_number(diffusion, section, "block_size", &g.diffusion_block_size, file, true, kSize));
    CUBEFORGE_TRY(read_number(diffusion, section, "mask_token_id", &g.mask_token_id, file, true, kOptionalSize));
    CUBEFORGE_TRY(read_number(diffusion, section, "threshold", &g.diffusion_threshold, file, false, kProbability));
    // The mask is a special token: its embedding row exists, and no code is it.
    if (g.mask_token_id < g.codes || g.mask_token_id >= g.vocab_size())
      return make_error(ErrorCode::kCorruptFile, "'" + file + "': " + section + ".mask_token_id = " +
                                                     std::to_string(g.mask_token_id) + " is not a special token (" +
                                                     std::to_string(g.codes) + ".." +
                                                     std::to_string(g.vocab_size() - 1) + ")");
  }

  ShapeModelConfig& s = config.shape;
  CUBEFORGE_TRY(read_key(shape, "shape_model", "encoder_with_cls_token", &s.encoder_with_cls_token, file, false));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_encoder_latents", &s.latents, file, true, kSize));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_decoder_latents", &s.decoder_latents,
                            file, false, kOptionalSize));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "embed_dim", &s.embed_dim, file, true, kSize));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "width", &s.width, file, true, kLayersOrWidth));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_heads", &s.heads, file, true, kLayersOrWidth));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "out_dim", &s.out_dim, file, false, kSize));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "eps", &s.eps, file, false, kEps));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_freqs", &s.num_freqs, file, true, kSize));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "point_feats", &s.point_feats, file, false, kOptionalSize));
  CUBEFORGE_TRY(read_key(shape, "shape_model", "embed_point_feats", &s.embed_point_feats, file, false));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_encoder_layers", &s.encoder_layers,
                            file, true, kOptionalLayers));
  CUBEFORGE_TRY(read_key(shape, "shape_model", "encoder_cross_attention_levels", &s.encoder_cross_attention_levels,
                         file, false));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_decoder_layers", &s.decoder_layers, file, true, kLayersOrWidth));
  CUBEFORGE_TRY(read_number(shape, "shape_model", "num_codes", &s.codes, file, true, kSize));
  if (const YAML::Node name = root["text_model_pretrained_model_name_or_path"]; name && name.IsScalar())
    config.text_model_name = name.as<std::string>("");

  if (g.width % g.heads != 0)
    return make_error(ErrorCode::kCorruptFile, "'" + file + "': gpt_model.n_embd is not a multiple of n_head");
  if (s.width % s.heads != 0)
    return make_error(ErrorCode::kCorruptFile, "'" + file + "': shape_model.width is not a multiple of num_heads");
  if (g.use_pooled_text_embed)
    return make_error(ErrorCode::kUnsupported, "'" + file + "': use_pooled_text_embed = true is not supported");
  return config;
}

Result<GptConfig> infer_gpt_config(const SafetensorsFile& gpt) {
  GptConfig c;
  CUBEFORGE_ASSIGN_OR_RETURN(auto wte, shape_of(gpt, "transformer.wte.weight"));
  if (wte.size() != 2 || wte[0] <= 3)
    return make_error(ErrorCode::kCorruptFile, "'" + gpt.name() + "': transformer.wte.weight has shape " + shape_to_string(wte) + ", expected [codes + 3, width]");
  CUBEFORGE_ASSIGN_OR_RETURN(c.width, size_from_shape(gpt, "transformer.wte.weight width", wte[1]));
  CUBEFORGE_ASSIGN_OR_RETURN(c.codes, size_from_shape(gpt, "transformer.wte.weight rows - 3", wte[0] - 3));
  CUBEFORGE_ASSIGN_OR_RETURN(c.dual_layers, count_layers(gpt, "transformer.dual_blocks.", kMinTensorsPerDualBlock));
  CUBEFORGE_ASSIGN_OR_RETURN(c.single_layers,
                             count_layers(gpt, "transformer.single_blocks.", kMinTensorsPerSingleBlock));
  if (c.dual_layers == 0) return make_error(ErrorCode::kCorruptFile, "'" + gpt.name() + "' has no transformer.dual_blocks.* tensors; is this a Cube 3D shape_gpt file?");
  CUBEFORGE_ASSIGN_OR_RETURN(auto q_norm, shape_of(gpt, "transformer.dual_blocks.0.attn.pre_x.q_norm.weight"));
  if (q_norm.size() != 1 || q_norm[0] <= 0 || c.width % q_norm[0] != 0)
    return make_error(ErrorCode::kCorruptFile, "'" + gpt.name() + "': per-head norm size " + shape_to_string(q_norm) + " does not divide width " + std::to_string(c.width));
  c.heads = int(c.width / q_norm[0]);
  CUBEFORGE_ASSIGN_OR_RETURN(auto text_proj, shape_of(gpt, "text_proj.weight"));
  if (text_proj.size() != 2) return make_error(ErrorCode::kCorruptFile, "'" + gpt.name() + "': text_proj.weight is not a matrix");
  CUBEFORGE_ASSIGN_OR_RETURN(c.text_width, size_from_shape(gpt, "text_proj.weight columns", text_proj[1]));
  CUBEFORGE_ASSIGN_OR_RETURN(auto shape_proj, shape_of(gpt, "shape_proj.weight"));
  if (shape_proj.size() != 2) return make_error(ErrorCode::kCorruptFile, "'" + gpt.name() + "': shape_proj.weight is not a matrix");
  CUBEFORGE_ASSIGN_OR_RETURN(c.shape_embed_dim, size_from_shape(gpt, "shape_proj.weight columns", shape_proj[1]));
  c.use_bbox = gpt.contains("bbox_proj.weight");
  c.bias = gpt.contains("transformer.dual_blocks.0.attn.pre_x.c_v.bias");
  return c;
}

Result<ShapeModelConfig> infer_shape_config(const SafetensorsFile& shape) {
  ShapeModelConfig c;
  CUBEFORGE_ASSIGN_OR_RETURN(auto positional, shape_of(shape, "decoder.positional_encodings"));
  if (positional.size() != 2)
    return make_error(ErrorCode::kCorruptFile, "'" + shape.name() + "': decoder.positional_encodings is not [latents, width]");
  CUBEFORGE_ASSIGN_OR_RETURN(c.latents, size_from_shape(shape, "decoder.positional_encodings rows", positional[0]));
  CUBEFORGE_ASSIGN_OR_RETURN(c.width, size_from_shape(shape, "decoder.positional_encodings width", positional[1]));
  CUBEFORGE_ASSIGN_OR_RETURN(auto codebook, shape_of(shape, "bottleneck.block.codebook.weight"));
  if (codebook.size() != 2) return make_error(ErrorCode::kCorruptFile, "'" + shape.name() + "': codebook is not a matrix");
  CUBEFORGE_ASSIGN_OR_RETURN(c.codes, size_from_shape(shape, "codebook rows", codebook[0]));
  CUBEFORGE_ASSIGN_OR_RETURN(c.embed_dim, size_from_shape(shape, "codebook columns", codebook[1]));
  CUBEFORGE_ASSIGN_OR_RETURN(c.decoder_layers, count_layers(shape, "decoder.blocks.", kMinTensorsPerShapeBlock));
  CUBEFORGE_ASSIGN_OR_RETURN(c.encoder_layers, count_layers(shape, "encoder.blocks.", kMinTensorsPerShapeBlock));
  if (c.decoder_layers == 0) return make_error(ErrorCode::kCorruptFile, "'" + shape.name() + "' has no decoder.blocks.* tensors; is this a Cube 3D shape_tokenizer file?");
  CUBEFORGE_ASSIGN_OR_RETURN(auto q_norm, shape_of(shape, "decoder.blocks.0.attn.q_norm.weight"));
  if (q_norm.size() != 1 || q_norm[0] <= 0 || c.width % q_norm[0] != 0)
    return make_error(ErrorCode::kCorruptFile, "'" + shape.name() + "': per-head norm size does not divide width");
  c.heads = int(c.width / q_norm[0]);
  CUBEFORGE_ASSIGN_OR_RETURN(auto embedder, shape_of(shape, "embedder.weight"));
  if (embedder.size() != 2 || embedder[0] != 3) return make_error(ErrorCode::kCorruptFile, "'" + shape.name() + "': embedder.weight is not [3, num_freqs]");
  CUBEFORGE_ASSIGN_OR_RETURN(c.num_freqs, size_from_shape(shape, "embedder.weight columns", embedder[1]));
  for (int i = 0; i < c.encoder_layers; ++i)
    if (shape.contains("encoder.blocks." + std::to_string(i) + ".attn.c_q.weight")) c.encoder_cross_attention_levels.push_back(i);
  if (shape.contains("encoder.query")) {
    CUBEFORGE_ASSIGN_OR_RETURN(auto query, shape_of(shape, "encoder.query"));
    c.encoder_with_cls_token = !query.empty() && query[0] == c.latents + 1;
  }
  if (shape.contains("encoder.feat_in.in_layer.weight")) {
    CUBEFORGE_ASSIGN_OR_RETURN(auto feat_in, shape_of(shape, "encoder.feat_in.in_layer.weight"));
    if (feat_in.size() == 2) {
      if (feat_in[1] == 2 * c.fourier_dim()) {
        c.embed_point_feats = true;
        c.point_feats = 3;
      } else {
        c.point_feats = int(feat_in[1]) - c.fourier_dim();
      }
    }
  }
  CUBEFORGE_ASSIGN_OR_RETURN(auto head, shape_of(shape, "occupancy_decoder.c_head.weight"));
  c.out_dim = head.empty() ? 1 : int(head[0]);
  return c;
}

std::vector<ExpectedTensor> expected_gpt_tensors(const GptConfig& c) {
  std::vector<ExpectedTensor> t;
  const int64_t d = c.width, hd = c.head_dim(), ff = 4 * int64_t(c.width);
  add_linear(t, "text_proj", d, c.text_width, c.bias);
  add_linear(t, "shape_proj", d, c.shape_embed_dim, true);
  if (c.use_bbox) add_linear(t, "bbox_proj", d, 3, true);
  add(t, "transformer.wte.weight", {c.vocab_size(), d});
  add(t, "lm_head.weight", {c.vocab_size(), d});
  auto add_pre = [&](const std::string& p, bool query) {
    if (query) {
      add(t, p + ".c_qk.weight", {2 * d, d});
      add(t, p + ".q_norm.weight", {hd});
    } else {
      add_linear(t, p + ".c_k", d, d, c.bias);
    }
    add(t, p + ".k_norm.weight", {hd});
    add_linear(t, p + ".c_v", d, d, c.bias);
  };
  auto add_mlp = [&](const std::string& p) {
    add_linear(t, p + ".gate_proj", ff, d, c.bias);
    add_linear(t, p + ".up_proj", ff, d, c.bias);
    add_linear(t, p + ".down_proj", d, ff, c.bias);
  };
  for (int i = 0; i < c.dual_layers; ++i) {
    const std::string p = "transformer.dual_blocks." + std::to_string(i);
    const bool cond_pre_only = i == c.dual_layers - 1;
    add_pre(p + ".attn.pre_x", true);
    add_pre(p + ".attn.pre_c", !cond_pre_only);
    add_linear(t, p + ".post_1.c_proj", d, d, c.bias);
    add_mlp(p + ".post_1.mlp");
    if (!cond_pre_only) {
      add_linear(t, p + ".post_2.c_proj", d, d, c.bias);
      add_mlp(p + ".post_2.mlp");
    }
  }
  for (int i = 0; i < c.single_layers; ++i) {
    const std::string p = "transformer.single_blocks." + std::to_string(i);
    add(t, p + ".attn.c_qk.weight", {2 * d, d});
    add_linear(t, p + ".attn.c_v", d, d, c.bias);
    add_linear(t, p + ".attn.c_proj", d, d, c.bias);
    add(t, p + ".attn.q_norm.weight", {hd});
    add(t, p + ".attn.k_norm.weight", {hd});
    add_mlp(p + ".mlp");
  }
  return t;
}

std::vector<ExpectedTensor> expected_shape_tensors(const ShapeModelConfig& c) {
  std::vector<ExpectedTensor> t;
  const int64_t w = c.width, hd = c.head_dim(), ff = 4 * int64_t(c.width), f = c.num_freqs;
  for (const char* embedder : {"embedder.weight", "encoder.embedder.weight", "occupancy_decoder.embedder.weight"})
    add(t, embedder, {3, f});
  auto add_mlp = [&](const std::string& p) {
    add_linear(t, p + ".up_proj", ff, w, true);
    add_linear(t, p + ".down_proj", w, ff, true);
  };
  auto add_self = [&](const std::string& p) {
    add_linear(t, p + ".attn.c_qk", 2 * w, w, true);
    add_linear(t, p + ".attn.c_v", w, w, true);
    add_linear(t, p + ".attn.c_proj", w, w, true);
    add(t, p + ".attn.q_norm.weight", {hd});
    add(t, p + ".attn.k_norm.weight", {hd});
    add_mlp(p + ".mlp");
  };
  auto add_cross = [&](const std::string& p) {
    for (const char* name : {".attn.c_q", ".attn.c_k", ".attn.c_v", ".attn.c_proj"}) add_linear(t, p + name, w, w, true);
    add_mlp(p + ".mlp");
  };
  add(t, "encoder.query", {c.latents + (c.encoder_with_cls_token ? 1 : 0), w});
  const int64_t feat_in = c.embed_point_feats ? 2 * c.fourier_dim() : c.fourier_dim() + c.point_feats;
  add_linear(t, "encoder.feat_in.in_layer", w, feat_in, true);
  add_linear(t, "encoder.feat_in.out_layer", w, w, true);
  for (int i = 0; i < c.encoder_layers; ++i) {
    const std::string p = "encoder.blocks." + std::to_string(i);
    const auto& levels = c.encoder_cross_attention_levels;
    if (std::find(levels.begin(), levels.end(), i) != levels.end()) add_cross(p);
    else add_self(p);
  }
  add(t, "encoder.ln_f.weight", {w});
  add(t, "encoder.ln_f.bias", {w});
  add(t, "bottleneck.block.codebook.weight", {c.codes, c.embed_dim});
  add_linear(t, "bottleneck.block.c_in", c.embed_dim, w, true);
  add_linear(t, "bottleneck.block.c_x", c.embed_dim, w, true);
  add_linear(t, "bottleneck.block.c_out", w, c.embed_dim, true);
  add(t, "bottleneck.block.cb_weight", {c.embed_dim});
  add(t, "bottleneck.block.cb_bias", {c.embed_dim});
  add(t, "bottleneck.block.norm.weight", {c.embed_dim});
  add(t, "decoder.positional_encodings", {c.latents, w});
  for (int i = 0; i < c.decoder_layers; ++i) add_self("decoder.blocks." + std::to_string(i));
  add_linear(t, "occupancy_decoder.query_in.in_layer", w, c.fourier_dim(), true);
  add_linear(t, "occupancy_decoder.query_in.out_layer", w, w, true);
  add_cross("occupancy_decoder.attn_out");
  add(t, "occupancy_decoder.ln_f.weight", {w});
  add(t, "occupancy_decoder.ln_f.bias", {w});
  add_linear(t, "occupancy_decoder.c_head", c.out_dim, w, true);
  return t;
}

Status check_tensor_set(const SafetensorsFile& file, const std::vector<ExpectedTensor>& expected) {
  std::set<std::string> expected_names;
  std::vector<std::string> missing, wrong_shape;
  for (const auto& e : expected) {
    expected_names.insert(e.name);
    auto view = file.get(e.name);
    if (!view.ok()) {
      missing.push_back(e.name);
    } else if (view->shape() != e.shape) {
      wrong_shape.push_back(e.name + " is " + shape_to_string(view->shape()) + ", expected " + shape_to_string(e.shape));
    } else if (e.dtype && view->dtype() != *e.dtype) {
      wrong_shape.push_back(e.name + " has dtype " + std::string(dtype_name(view->dtype())) + ", expected " +
                            std::string(dtype_name(*e.dtype)));
    } else if (!e.dtype && !dtype_is_float(view->dtype())) {
      wrong_shape.push_back(e.name + " has dtype " + std::string(dtype_name(view->dtype())) + ", expected F32, F16 or BF16");
    }
  }
  std::vector<std::string> unexpected;
  // Names from the file are shown escaped and cut (a name may be megabytes long).
  for (const auto& e : file.entries())
    if (!expected_names.count(e.name)) unexpected.push_back(readable_untrusted(e.name));
  // Every tensor is one the model uses: each must hold finite numbers.
  if (missing.empty() && unexpected.empty() && wrong_shape.empty()) return file.check_all_finite();
  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    const size_t shown = std::min<size_t>(names.size(), 12);
    for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > shown) s += ", ... (" + std::to_string(names.size() - shown) + " more)";
    return s;
  };
  std::string message = "'" + file.name() + "' does not match the model configuration:";
  if (!missing.empty()) message += " missing tensors: " + join(missing) + ";";
  if (!unexpected.empty()) message += " unexpected tensors: " + join(unexpected) + ";";
  if (!wrong_shape.empty()) message += " wrong tensors: " + join(wrong_shape) + ";";
  message += " check that the file belongs to this model folder";
  return make_error(ErrorCode::kCorruptFile, message);
}

Status check_gpt_config(const GptConfig& config, const SafetensorsFile& gpt, const std::string& config_name) {
  CUBEFORGE_ASSIGN_OR_RETURN(GptConfig inferred, infer_gpt_config(gpt));
  const std::string f = gpt.name();
  if (config.width != inferred.width) return mismatch(config_name, "gpt_model.n_embd", config.width, f, "transformer.wte.weight width", inferred.width);
  if (config.codes != inferred.codes) return mismatch(config_name, "gpt_model.shape_model_vocab_size", config.codes, f, "transformer.wte.weight rows - 3", inferred.codes);
  if (config.dual_layers != inferred.dual_layers) return mismatch(config_name, "gpt_model.n_layer", config.dual_layers, f, "the number of transformer.dual_blocks", inferred.dual_layers);
  if (config.single_layers != inferred.single_layers) return mismatch(config_name, "gpt_model.n_single_layer", config.single_layers, f, "the number of transformer.single_blocks", inferred.single_layers);
  if (config.heads != inferred.heads) return mismatch(config_name, "gpt_model.n_head", config.heads, f, "width / per-head norm size", inferred.heads);
  if (config.text_width != inferred.text_width) return mismatch(config_name, "gpt_model.text_model_embed_dim", config.text_width, f, "text_proj.weight columns", inferred.text_width);
  if (config.shape_embed_dim != inferred.shape_embed_dim) return mismatch(config_name, "gpt_model.shape_model_embed_dim", config.shape_embed_dim, f, "shape_proj.weight columns", inferred.shape_embed_dim);
  if (config.use_bbox != inferred.use_bbox) return mismatch(config_name, "gpt_model.use_bbox", config.use_bbox, f, "bbox_proj present", inferred.use_bbox);
  // The tensor set is checked where the GPT binds its tensors, which knows
  // the quantised forms a matrix may take (DualStreamGpt::from_file).
  return ok_status();
}

Status check_shape_config(const ShapeModelConfig& config, const SafetensorsFile& shape, const std::string& config_name) {
  CUBEFORGE_ASSIGN_OR_RETURN(ShapeModelConfig inferred, infer_shape_config(shape));
  const std::string f = shape.name();
  if (config.width != inferred.width) return mismatch(config_name, "shape_model.width", config.width, f, "decoder.positional_encodings width", inferred.width);
  if (config.latents != inferred.latents) return mismatch(config_name, "shape_model.num_encoder_latents", config.latents, f, "decoder.positional_encodings rows", inferred.latents);
  if (config.codes != inferred.codes) return mismatch(config_name, "shape_model.num_codes", config.codes, f, "codebook rows", inferred.codes);
  if (config.embed_dim != inferred.embed_dim) return mismatch(config_name, "shape_model.embed_dim", config.embed_dim, f, "codebook columns", inferred.embed_dim);
  if (config.heads != inferred.heads) return mismatch(config_name, "shape_model.num_heads", config.heads, f, "width / per-head norm size", inferred.heads);
  if (config.decoder_layers != inferred.decoder_layers) return mismatch(config_name, "shape_model.num_decoder_layers", config.decoder_layers, f, "the number of decoder.blocks", inferred.decoder_layers);
  if (config.encoder_layers != inferred.encoder_layers) return mismatch(config_name, "shape_model.num_encoder_layers", config.encoder_layers, f, "the number of encoder.blocks", inferred.encoder_layers);
  if (config.num_freqs != inferred.num_freqs) return mismatch(config_name, "shape_model.num_freqs", config.num_freqs, f, "embedder.weight columns", inferred.num_freqs);
  auto levels = config.encoder_cross_attention_levels;
  std::sort(levels.begin(), levels.end());
  if (levels != inferred.encoder_cross_attention_levels)
    return make_error(ErrorCode::kCorruptFile, "'" + config_name + "' lists shape_model.encoder_cross_attention_levels that do not match the encoder.blocks.*.attn.c_q tensors in '" + f + "'");
  return check_tensor_set(shape, expected_shape_tensors(config));
}

}  // namespace cubeforge
