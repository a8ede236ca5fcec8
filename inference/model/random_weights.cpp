// Random-weight model presets and their weight images (see random_weights.h).
#include "inference/model/random_weights.h"

#include <cmath>
#include <cstring>

#include "inference/core/thread_pool.h"

namespace cubeforge {

Result<ModelConfig> preset_model_config(std::string_view preset) {
  // Everything not named keeps the reference's defaults (config.h): rope_theta
  // 10000, biases, eps 1e-6, one occupancy logit, a cls token.
  ModelConfig m;
  m.text_model_name = "openai/clip-vit-large-patch14";
  if (preset == "v05" || preset == "v01") {
    const bool v05 = preset == "v05";
    m.gpt = {.dual_layers = 23, .single_layers = 1, .heads = 12, .width = 1536, .codes = 16384,
             .shape_embed_dim = 32, .text_width = 768, .use_bbox = v05};
    m.shape = {.latents = v05 ? 1024 : 512, .embed_dim = 32, .width = 768, .heads = 12, .num_freqs = 128,
               .point_feats = 3, .encoder_layers = 13, .encoder_cross_attention_levels = {0, 2, 4, 8},
               .decoder_layers = 24, .codes = 16384};
  } else if (preset == "small") {
    m.gpt = {.dual_layers = 8, .single_layers = 1, .heads = 8, .width = 512, .codes = 4096, .shape_embed_dim = 16,
             .text_width = 256, .use_bbox = true};
    m.shape = {.latents = 256, .embed_dim = 16, .width = 256, .heads = 8, .num_freqs = 32, .point_feats = 3,
               .encoder_layers = 4, .encoder_cross_attention_levels = {0, 2}, .decoder_layers = 8, .codes = 4096};
  } else {
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown model shape '" + std::string(preset) + "'; choose small, v01 or v05");
  }
  return m;
}

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Uniform in [-1, 1) from (stream, index): one 64-bit hash gives four values
// of 16 bits, plenty for weights that are stored in at most 16 bits anyway.
float uniform_signed(uint64_t stream, uint64_t index) {
  const uint64_t bits = mix(stream ^ (index >> 2) * 0x9e3779b97f4a7c15ull);
  const uint32_t part = uint32_t(bits >> (16 * (index & 3))) & 0xffffu;
  return (float(part) + 0.5f) * (2.0f / 65536.0f) - 1.0f;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// Values of one tensor: offset + scale · U(-1, 1), by role (random_weights.h).
struct ValueRange {
  float offset = 0.f;
  float scale = 0.02f;
};

ValueRange value_range(const ExpectedTensor& t) {
  const std::string& n = t.name;
  const bool vector = t.shape.size() == 1;
  if (ends_with(n, "cb_weight") || (vector && ends_with(n, ".weight") && (contains(n, "norm") || contains(n, "ln_"))))
    return {1.f, 0.1f};
  if (ends_with(n, "codebook.weight") && t.shape.size() == 2) return {0.f, 1.f / float(t.shape[0])};
  if (ends_with(n, "embedder.weight") && t.shape.size() == 2)
    return {0.f, std::sqrt(1.5f * float(t.shape[1]))};  // variance F/2, like randn·sqrt(F/2)
  if (n == "encoder.query") return {0.f, 1.f};
  if (n == "decoder.positional_encodings" && t.shape.size() == 2) return {0.f, std::sqrt(3.f / float(t.shape[1]))};
  if (t.shape.size() == 2) return {0.f, std::sqrt(3.f / float(t.shape[1]))};  // variance 1/fan_in
  return {};
}

int64_t element_count(const ExpectedTensor& t) {
  int64_t count = 1;
  for (int64_t d : t.shape) count *= d;
  return count;
}

// Fills tensor number `index` of a model into `out` (element_count × dtype size bytes).
void fill_tensor(const ExpectedTensor& tensor, size_t index, uint64_t seed, DType dtype, std::byte* out) {
  const ValueRange range = value_range(tensor);
  const uint64_t stream = mix(seed * 0x100000001b3ull + index);
  parallel_for(element_count(tensor), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float v = range.offset + range.scale * uniform_signed(stream, uint64_t(i));
      if (dtype == DType::kF32) {
        std::memcpy(out + size_t(i) * 4, &v, 4);
      } else {
        const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(out + size_t(i) * 2, &h, 2);
      }
    }
  });
}

bool supported(DType dtype) { return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16; }

}  // namespace

std::vector<OwnedTensor> random_tensors(const std::vector<ExpectedTensor>& tensors, uint64_t seed, DType dtype) {
  if (!supported(dtype)) dtype = DType::kF32;
  std::vector<OwnedTensor> out;
  out.reserve(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    OwnedTensor owned{tensors[t].name, dtype, tensors[t].shape, {}};
    owned.bytes.resize(size_t(element_count(tensors[t])) * dtype_size(dtype));
    fill_tensor(tensors[t], t, seed, dtype, owned.bytes.data());
    out.push_back(std::move(owned));
  }
  return out;
}

Result<SafetensorsFile> random_weights_file(const std::vector<ExpectedTensor>& tensors, uint64_t seed, DType dtype,
                                            std::string name) {
  if (!supported(dtype)) return make_error(ErrorCode::kInvalidArgument, "random weights must be F32, F16 or BF16");
  std::vector<TensorEntry> entries;
  for (const ExpectedTensor& t : tensors) entries.push_back(TensorEntry{t.name, dtype, t.shape});
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsLayout layout, lay_out_safetensors(std::move(entries), {}, name));
  return SafetensorsFile::build_in_memory(layout.file_size(), std::move(name), [&](std::span<std::byte> image) {
    std::memcpy(image.data(), layout.header.data(), layout.header.size());
    std::byte* data = image.data() + layout.header.size();
    for (size_t t = 0; t < tensors.size(); ++t)
      fill_tensor(tensors[t], t, seed, dtype, data + layout.tensors[t].begin);
  });
}

Result<ShapeTokenizer> random_shape_tokenizer(std::string_view preset, uint64_t seed) {
  CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig config, preset_model_config(preset));
  const std::string name = "random-" + std::string(preset) + "-shape-tokenizer";
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file,
                             random_weights_file(expected_shape_tensors(config.shape), seed, DType::kF32, name));
  return ShapeTokenizer::from_file(std::move(file), config.shape, "the " + std::string(preset) + " preset");
}

}  // namespace cubeforge
