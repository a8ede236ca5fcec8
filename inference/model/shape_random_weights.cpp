// Random-weight shape tokenizer images (see shape_random_weights.h).
#include "inference/model/shape_random_weights.h"

#include <cmath>
#include <cstring>

namespace cubeforge {

namespace {

// splitmix64: tiny, fast, and the same stream on every platform.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float symmetric() { return float(double(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

 private:
  uint64_t state_;
};

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

void store(float value, DType dtype, std::byte* out) {
  if (dtype == DType::kBF16) {
    const uint16_t bits = f32_to_bf16(value);
    std::memcpy(out, &bits, 2);
  } else if (dtype == DType::kF16) {
    const uint16_t bits = f32_to_f16(value);
    std::memcpy(out, &bits, 2);
  } else {
    std::memcpy(out, &value, 4);
  }
}

}  // namespace

std::vector<OwnedTensor> random_shape_tensors(const ShapeModelConfig& config, uint64_t seed, DType dtype) {
  if (dtype != DType::kF16 && dtype != DType::kBF16) dtype = DType::kF32;
  std::vector<OwnedTensor> tensors;
  Random random(seed);
  for (const auto& expected : expected_shape_tensors(config)) {
    OwnedTensor t{expected.name, dtype, expected.shape, {}};
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    const size_t element = dtype_size(dtype);
    t.bytes.resize(size_t(count) * element);
    // Scale and offset by role, so activations stay in a trained model's range.
    float scale = 0.02f, offset = 0.f;
    const std::string& n = t.name;
    if (ends_with(n, "norm.weight") || ends_with(n, "ln_f.weight") || ends_with(n, "cb_weight")) {
      scale = 0.1f;
      offset = 1.f;
    } else if (ends_with(n, "codebook.weight")) {
      scale = 1.f / float(config.codes);
    } else if (ends_with(n, "embedder.weight")) {
      scale = std::sqrt(1.5f * float(config.num_freqs));  // variance 0.5·F, like randn·sqrt(0.5F)
    } else if (n == "encoder.query") {
      scale = 1.f;
    } else if (n == "decoder.positional_encodings") {
      scale = std::sqrt(3.f / float(config.width));  // unit-norm rows on average
    } else if (t.shape.size() == 2) {
      scale = std::sqrt(3.f / float(t.shape[1]));  // variance 1/fan_in
    }
    for (int64_t i = 0; i < count; ++i) store(offset + scale * random.symmetric(), dtype, t.bytes.data() + i * element);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::vector<std::byte> safetensors_image(std::span<const OwnedTensor> tensors) {
  std::vector<TensorToWrite> views;
  for (const OwnedTensor& t : tensors) views.push_back({t.name, t.dtype, t.shape, t.bytes});
  auto image = cubeforge::safetensors_image(views);
  CUBEFORGE_CHECK(image.ok(), "random tensors have unique names and sizes that match their shapes");
  return std::move(image).value();
}

Result<SafetensorsFile> random_shape_tokenizer_file(const ShapeModelConfig& config, uint64_t seed, DType dtype,
                                                    const std::string& name) {
  const auto tensors = random_shape_tensors(config, seed, dtype);
  return SafetensorsFile::from_bytes(safetensors_image(tensors), name);
}

}  // namespace cubeforge
