// Upload of the GPT's weights (see gpt_weights.h): tensors are read by name
// from the checkpoint the CPU model loaded, concatenated on the host where
// they are fused, and copied to the device once.
#include "inference/cuda_backend/gpt_weights.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace cubeforge::cuda {
namespace {

struct Binder {
  const DualStreamGpt& model;
  const SafetensorsFile& file;
  GptWeights& weights;

  // Rows of the named 2-D weights, stacked, in one device matrix; all of them
  // in one format (a model converts or quantises every decode matrix alike).
  Result<DeviceMatrix> matrix(const std::vector<std::string>& names) {
    std::vector<cpu::WeightMatrix> views;
    bool all_bf16 = true;
    int64_t rows = 0, cols = -1;
    for (const std::string& name : names) {
      CUBEFORGE_ASSIGN_OR_RETURN(cpu::WeightMatrix view, model.matrix(name));
      if (cols >= 0 && view.cols != cols)
        return make_error(ErrorCode::kCorruptFile, file.name() + ": tensor '" + name + "' has " +
                                                       std::to_string(view.cols) + " columns, not " +
                                                       std::to_string(cols));
      if (!views.empty() && (view.quantization != views.front().quantization || view.group != views.front().group))
        return make_error(ErrorCode::kCorruptFile, file.name() + ": tensor '" + name + "' is not in the format of '" +
                                                       names.front() + "', with which it is fused");
      cols = view.cols;
      rows += view.rows;
      all_bf16 = all_bf16 && view.dtype == DType::kBF16;
      views.push_back(view);
    }
    DeviceMatrix m;
    m.rows = int(rows);
    m.cols = int(cols);
    const std::string label = names.front();
    const cpu::Quantization quantization = views.front().quantization;
    if (quantization != cpu::Quantization::kNone) {
      m.type = quantization == cpu::Quantization::kQ8 ? DType::kI8 : DType::kU8;
      m.group = int(views.front().group);
      const std::size_t row_bytes = m.row_bytes(), groups = std::size_t(cols / m.group);
      std::vector<std::uint8_t> codes;
      std::vector<std::uint16_t> scales, offsets;
      for (const cpu::WeightMatrix& view : views) {
        const auto* begin = static_cast<const std::uint8_t*>(view.data);
        codes.insert(codes.end(), begin, begin + std::size_t(view.rows) * row_bytes);
        scales.insert(scales.end(), view.scales, view.scales + std::size_t(view.rows) * groups);
        if (view.offsets) offsets.insert(offsets.end(), view.offsets, view.offsets + std::size_t(view.rows) * groups);
      }
      CUBEFORGE_ASSIGN_OR_RETURN(m.codes, DeviceBuffer<std::uint8_t>::from_host(codes, label));
      CUBEFORGE_ASSIGN_OR_RETURN(m.scales, DeviceBuffer<std::uint16_t>::from_host(scales, label + " scales"));
      if (!offsets.empty()) {
        CUBEFORGE_ASSIGN_OR_RETURN(m.offsets, DeviceBuffer<std::uint16_t>::from_host(offsets, label + " offsets"));
      }
      weights.any_widened = true;
    } else if (all_bf16) {
      m.type = DType::kBF16;
      std::vector<std::uint16_t> host(size_t(rows) * size_t(cols));
      size_t at = 0;
      for (const cpu::WeightMatrix& view : views) {
        const size_t count = size_t(view.rows) * size_t(view.cols);
        std::memcpy(host.data() + at, view.data, count * sizeof(std::uint16_t));
        at += count;
      }
      CUBEFORGE_ASSIGN_OR_RETURN(m.bf16, DeviceBuffer<std::uint16_t>::from_host(host, label));
      weights.any_widened = true;
    } else {
      m.type = DType::kF32;
      std::vector<float> host(size_t(rows) * size_t(cols));
      size_t at = 0;
      for (const cpu::WeightMatrix& view : views) {
        const size_t count = size_t(view.rows) * size_t(view.cols);
        convert_to_f32(view.dtype, view.data, host.data() + at, count);
        at += count;
      }
      CUBEFORGE_ASSIGN_OR_RETURN(m.f32, DeviceBuffer<float>::from_host(host, label));
    }
    weights.bytes += m.bytes();
    weights.largest_matrix = std::max<int>(weights.largest_matrix, int(rows * cols));
    return m;
  }

  // The named vectors stacked (f32); a name that is empty stands for `zeros` zeros.
  Result<DeviceBuffer<float>> vector(const std::vector<std::pair<std::string, int>>& parts) {
    std::vector<float> host;
    for (const auto& [name, zeros] : parts) {
      if (name.empty()) {
        host.insert(host.end(), size_t(zeros), 0.0f);
        continue;
      }
      CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> values, file.read_f32(name));
      host.insert(host.end(), values.begin(), values.end());
    }
    std::string label;
    for (const auto& part : parts)
      if (!part.first.empty()) label = part.first;
    CUBEFORGE_ASSIGN_OR_RETURN(DeviceBuffer<float> buffer, DeviceBuffer<float>::from_host(host, label));
    weights.bytes += buffer.bytes();
    return buffer;
  }

  Result<PreAttentionWeights> pre_attention(const std::string& p, bool query, bool bias) {
    const int d = weights.config.width;
    PreAttentionWeights pre;
    pre.has_query = query;
    if (query) {
      CUBEFORGE_ASSIGN_OR_RETURN(pre.qkv, matrix({p + ".c_qk.weight", p + ".c_v.weight"}));
      if (bias) {
        CUBEFORGE_ASSIGN_OR_RETURN(pre.qkv_bias, vector({{"", 2 * d}, {p + ".c_v.bias", 0}}));
      }
      CUBEFORGE_ASSIGN_OR_RETURN(pre.q_norm, vector({{p + ".q_norm.weight", 0}}));
    } else {
      CUBEFORGE_ASSIGN_OR_RETURN(pre.qkv, matrix({p + ".c_k.weight", p + ".c_v.weight"}));
      if (bias) {
        CUBEFORGE_ASSIGN_OR_RETURN(pre.qkv_bias, vector({{p + ".c_k.bias", 0}, {p + ".c_v.bias", 0}}));
      }
    }
    CUBEFORGE_ASSIGN_OR_RETURN(pre.k_norm, vector({{p + ".k_norm.weight", 0}}));
    return pre;
  }

  Result<PostAttentionWeights> post_attention(const std::string& proj, const std::string& mlp, bool bias) {
    PostAttentionWeights post;
    CUBEFORGE_ASSIGN_OR_RETURN(post.proj, matrix({proj + ".weight"}));
    CUBEFORGE_ASSIGN_OR_RETURN(post.gate_up, matrix({mlp + ".gate_proj.weight", mlp + ".up_proj.weight"}));
    CUBEFORGE_ASSIGN_OR_RETURN(post.down, matrix({mlp + ".down_proj.weight"}));
    if (bias) {
      CUBEFORGE_ASSIGN_OR_RETURN(post.proj_bias, vector({{proj + ".bias", 0}}));
      CUBEFORGE_ASSIGN_OR_RETURN(post.gate_up_bias, vector({{mlp + ".gate_proj.bias", 0}, {mlp + ".up_proj.bias", 0}}));
      CUBEFORGE_ASSIGN_OR_RETURN(post.down_bias, vector({{mlp + ".down_proj.bias", 0}}));
    }
    return post;
  }
};

std::size_t post_bytes(const PostAttentionWeights& post) {
  return post.proj.bytes() + post.gate_up.bytes() + post.down.bytes();
}

}  // namespace

Result<GptWeights> upload_gpt_weights(const DualStreamGpt& model) {
  GptWeights weights;
  weights.config = model.config();
  const GptConfig& c = weights.config;
  Binder bind{model, model.tensors(), weights};
  for (int i = 0; i < c.dual_layers; ++i) {
    const std::string p = "transformer.dual_blocks." + std::to_string(i);
    BlockWeights block;
    block.dual = true;
    block.cond_pre_only = i == c.dual_layers - 1;
    CUBEFORGE_ASSIGN_OR_RETURN(block.pre_x, bind.pre_attention(p + ".attn.pre_x", true, c.bias));
    CUBEFORGE_ASSIGN_OR_RETURN(block.pre_c, bind.pre_attention(p + ".attn.pre_c", !block.cond_pre_only, c.bias));
    CUBEFORGE_ASSIGN_OR_RETURN(block.post_x, bind.post_attention(p + ".post_1.c_proj", p + ".post_1.mlp", c.bias));
    if (!block.cond_pre_only) {
      CUBEFORGE_ASSIGN_OR_RETURN(block.post_c, bind.post_attention(p + ".post_2.c_proj", p + ".post_2.mlp", c.bias));
    }
    weights.decode_bytes += block.pre_x.qkv.bytes() + post_bytes(block.post_x);
    weights.blocks.push_back(std::move(block));
  }
  for (int i = 0; i < c.single_layers; ++i) {
    const std::string p = "transformer.single_blocks." + std::to_string(i);
    BlockWeights block;
    block.dual = false;
    CUBEFORGE_ASSIGN_OR_RETURN(block.pre_x, bind.pre_attention(p + ".attn", true, c.bias));
    CUBEFORGE_ASSIGN_OR_RETURN(block.post_x, bind.post_attention(p + ".attn.c_proj", p + ".mlp", c.bias));
    weights.decode_bytes += block.pre_x.qkv.bytes() + post_bytes(block.post_x);
    weights.blocks.push_back(std::move(block));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(weights.lm_head, bind.matrix({"lm_head.weight"}));
  weights.decode_bytes += weights.lm_head.bytes();
  const auto table = model.token_embedding_table();
  CUBEFORGE_ASSIGN_OR_RETURN(weights.token_embedding, DeviceBuffer<float>::from_host(
                                                          std::vector<float>(table.begin(), table.end()),
                                                          "transformer.wte (codebook installed)"));
  weights.bytes += weights.token_embedding.bytes();
  // The uploads ran on the legacy stream; sessions compute on non-blocking
  // streams, which do not wait for it.
  CUBEFORGE_TRY(synchronize_device());
  return weights;
}

std::size_t gpt_weight_device_bytes(const DualStreamGpt& model) {
  std::size_t bytes = model.token_embedding_table().size() * sizeof(float);
  for (const TensorEntry& entry : model.tensors().entries()) {
    if (entry.name == "transformer.wte.weight" || entry.name.rfind("text_proj", 0) == 0 ||
        entry.name.rfind("shape_proj", 0) == 0 || entry.name.rfind("bbox_proj", 0) == 0)
      continue;  // the CPU projects the condition and installs the codebook
    const bool two_dimensional = entry.shape.size() == 2;
    const std::size_t elements = std::size_t(entry.element_count());
    bytes += two_dimensional && entry.dtype == DType::kBF16 ? elements * 2 : elements * 4;
  }
  return bytes;
}

}  // namespace cubeforge::cuda
