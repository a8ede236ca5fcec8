// The DualStreamRoformer's weights: loading, checking and binding them, and
// the load-time steps of the reference (codebook rows, condition projection).
// Its forward is each backend's (cpu_backend/gpt_session.cpp on the CPU).
#include "inference/model/gpt.h"

#include <algorithm>
#include <cstring>

#include "inference/model/gpt_layers.h"

namespace cubeforge {

DualStreamGpt::DualStreamGpt(DualStreamGpt&&) noexcept = default;
DualStreamGpt& DualStreamGpt::operator=(DualStreamGpt&&) noexcept = default;
DualStreamGpt::~DualStreamGpt() = default;

const GptConfig& DualStreamGpt::config() const { return weights_->config; }

const WeightOptions& DualStreamGpt::weight_options() const { return weights_->weight_options; }

const SafetensorsFile& DualStreamGpt::tensors() const { return *weights_->file; }

Result<cpu::WeightMatrix> DualStreamGpt::matrix(const std::string& name) const {
  return WeightBinder(*weights_->file, &weights_->converted).matrix(name);
}

std::vector<std::string> DualStreamGpt::decode_matrix_names(const GptConfig& config) {
  std::vector<std::string> names = {"lm_head.weight"};
  auto add = [&](const std::string& prefix, std::initializer_list<const char*> layers) {
    for (const char* layer : layers) names.push_back(prefix + layer + ".weight");
  };
  for (int i = 0; i < config.dual_layers; ++i) {
    const std::string p = "transformer.dual_blocks." + std::to_string(i);
    add(p + ".attn.pre_x.", {"c_qk", "c_v"});
    add(p + ".post_1.", {"c_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"});
  }
  for (int i = 0; i < config.single_layers; ++i) {
    const std::string p = "transformer.single_blocks." + std::to_string(i);
    add(p + ".attn.", {"c_qk", "c_v", "c_proj"});
    add(p + ".mlp.", {"gate_proj", "up_proj", "down_proj"});
  }
  return names;
}

Result<DualStreamGpt> DualStreamGpt::load(const std::filesystem::path& path, const GptConfig* config,
                                          const WeightOptions& weights) {
  // Every decode step streams the shape-stream weights: keep them in huge pages.
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path, SafetensorsFile::Residence::kHugePages));
  GptConfig resolved;
  if (config) {
    CUBEFORGE_TRY(check_gpt_config(*config, file, "the model configuration"));
    resolved = *config;
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(resolved, infer_gpt_config(file));
  }
  return from_file(std::move(file), resolved, weights);
}

Result<DualStreamGpt> DualStreamGpt::from_file(SafetensorsFile file, const GptConfig& config,
                                               const WeightOptions& weights) {
  return from_shared_file(std::make_shared<const SafetensorsFile>(std::move(file)), config, weights);
}

Result<DualStreamGpt> DualStreamGpt::from_shared_file(std::shared_ptr<const SafetensorsFile> file,
                                                      const GptConfig& config, const WeightOptions& weights) {
  const std::vector<std::string> decode_matrices = decode_matrix_names(config);
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<ExpectedTensor> expected,
                             expected_with_quantized_forms(*file, expected_gpt_tensors(config), decode_matrices));
  CUBEFORGE_TRY(check_tensor_set(*file, expected));
  auto w = std::make_unique<Weights>();
  w->file = std::move(file);
  w->config = config;
  w->weight_options = weights;
  CUBEFORGE_ASSIGN_OR_RETURN(w->converted, convert_matrices(*w->file, decode_matrices, weights));
  const WeightBinder bind(*w->file, &w->converted);
  const bool bias = config.bias;
  CUBEFORGE_ASSIGN_OR_RETURN(w->text_proj, bind.linear("text_proj", bias));
  CUBEFORGE_ASSIGN_OR_RETURN(w->shape_proj, bind.linear("shape_proj", true));
  if (config.use_bbox) {
    CUBEFORGE_ASSIGN_OR_RETURN(w->bbox_proj, bind.linear("bbox_proj", true));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(w->lm_head, bind.linear("lm_head", false));
  CUBEFORGE_ASSIGN_OR_RETURN(w->token_embedding, bind.vector("transformer.wte.weight"));

  auto bind_pre = [&](const std::string& p, bool query) -> Result<PreAttention> {
    PreAttention pre;
    pre.has_query = query;
    if (query) {
      CUBEFORGE_ASSIGN_OR_RETURN(pre.qk, bind.linear(p + ".c_qk", false));
      CUBEFORGE_ASSIGN_OR_RETURN(pre.q_norm, bind.vector(p + ".q_norm.weight"));
    } else {
      CUBEFORGE_ASSIGN_OR_RETURN(pre.qk, bind.linear(p + ".c_k", bias));
    }
    CUBEFORGE_ASSIGN_OR_RETURN(pre.k_norm, bind.vector(p + ".k_norm.weight"));
    CUBEFORGE_ASSIGN_OR_RETURN(pre.v, bind.linear(p + ".c_v", bias));
    return pre;
  };
  auto bind_post = [&](const std::string& proj, const std::string& mlp) -> Result<PostAttention> {
    PostAttention post;
    CUBEFORGE_ASSIGN_OR_RETURN(post.proj, bind.linear(proj, bias));
    CUBEFORGE_ASSIGN_OR_RETURN(post.gate, bind.linear(mlp + ".gate_proj", bias));
    CUBEFORGE_ASSIGN_OR_RETURN(post.up, bind.linear(mlp + ".up_proj", bias));
    CUBEFORGE_ASSIGN_OR_RETURN(post.down, bind.linear(mlp + ".down_proj", bias));
    return post;
  };
  for (int i = 0; i < config.dual_layers; ++i) {
    const std::string p = "transformer.dual_blocks." + std::to_string(i);
    DualBlock block;
    block.cond_pre_only = i == config.dual_layers - 1;
    CUBEFORGE_ASSIGN_OR_RETURN(block.pre_x, bind_pre(p + ".attn.pre_x", true));
    CUBEFORGE_ASSIGN_OR_RETURN(block.pre_c, bind_pre(p + ".attn.pre_c", !block.cond_pre_only));
    CUBEFORGE_ASSIGN_OR_RETURN(block.post_1, bind_post(p + ".post_1.c_proj", p + ".post_1.mlp"));
    if (!block.cond_pre_only) {
      CUBEFORGE_ASSIGN_OR_RETURN(block.post_2, bind_post(p + ".post_2.c_proj", p + ".post_2.mlp"));
    }
    w->dual.push_back(std::move(block));
  }
  for (int i = 0; i < config.single_layers; ++i) {
    const std::string p = "transformer.single_blocks." + std::to_string(i);
    SingleBlock block;
    CUBEFORGE_ASSIGN_OR_RETURN(block.pre, bind_pre(p + ".attn", true));
    CUBEFORGE_ASSIGN_OR_RETURN(block.post, bind_post(p + ".attn.c_proj", p + ".mlp"));
    w->single.push_back(std::move(block));
  }
  DualStreamGpt model;
  model.weights_ = std::move(w);
  return model;
}

Status DualStreamGpt::install_codebook(std::span<const float> codebook) {
  const GptConfig& c = weights_->config;
  const size_t expected = size_t(c.codes) * size_t(c.shape_embed_dim);
  if (codebook.size() != expected)
    return make_error(ErrorCode::kInvalidArgument,
                      "the shape tokenizer's codebook has " + std::to_string(codebook.size()) +
                          " values, but the GPT expects " + std::to_string(c.codes) + " codes of size " +
                          std::to_string(c.shape_embed_dim) + "; the two model files do not belong together");
  cpu::linear(codebook.data(), c.codes, weights_->shape_proj.weight, weights_->shape_proj.bias_data(),
              weights_->token_embedding.data());
  return ok_status();
}

Result<std::vector<float>> DualStreamGpt::project_condition(std::span<const float> text_hidden,
                                                            const float* bbox_xyz) const {
  const GptConfig& c = weights_->config;
  if (text_hidden.empty() || text_hidden.size() % size_t(c.text_width) != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "text features have " + std::to_string(text_hidden.size()) +
                          " values, not a multiple of the GPT's text width " + std::to_string(c.text_width) +
                          "; the CLIP model does not match this GPT");
  const int tokens = int(text_hidden.size() / size_t(c.text_width));
  const int length = condition_length(tokens);
  std::vector<float> cond(size_t(length) * size_t(c.width));
  cpu::linear(text_hidden.data(), tokens, weights_->text_proj.weight, weights_->text_proj.bias_data(), cond.data());
  if (c.use_bbox) {
    const float zeros[3] = {0.f, 0.f, 0.f};
    cpu::linear(bbox_xyz ? bbox_xyz : zeros, 1, weights_->bbox_proj.weight, weights_->bbox_proj.bias_data(),
                cond.data() + size_t(tokens) * size_t(c.width));
  }
  return cond;
}

std::span<const float> DualStreamGpt::token_embedding(int token) const {
  const size_t d = size_t(weights_->config.width);
  return std::span<const float>(weights_->token_embedding).subspan(size_t(token) * d, d);
}

std::span<const float> DualStreamGpt::token_embedding_table() const { return weights_->token_embedding; }

namespace {

size_t pre_bytes(const PreAttention& p) { return p.qk.weight.byte_size() + p.v.weight.byte_size(); }
size_t post_bytes(const PostAttention& p) {
  return p.proj.weight.byte_size() + p.gate.weight.byte_size() + p.up.weight.byte_size() + p.down.weight.byte_size();
}

}  // namespace

size_t DualStreamGpt::decode_weight_bytes() const {
  size_t bytes = weights_->lm_head.weight.byte_size();
  for (const auto& b : weights_->dual) bytes += pre_bytes(b.pre_x) + post_bytes(b.post_1);
  for (const auto& b : weights_->single) bytes += pre_bytes(b.pre) + post_bytes(b.post);
  return bytes;
}

size_t DualStreamGpt::total_weight_bytes() const {
  size_t bytes = decode_weight_bytes() + weights_->text_proj.weight.byte_size() +
                 weights_->shape_proj.weight.byte_size() + weights_->token_embedding.size() * sizeof(float);
  for (const auto& b : weights_->dual) {
    bytes += pre_bytes(b.pre_c);
    if (!b.cond_pre_only) bytes += post_bytes(b.post_2);
  }
  return bytes;
}

}  // namespace cubeforge
