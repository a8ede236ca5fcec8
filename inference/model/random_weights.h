// Random-weight models: the real Cube 3D sizes (or any configuration) filled
// with deterministic pseudo-random values of a trained model's scale, for
// benchmarks without a licensed checkpoint and for tests that build (or break)
// model files. Nothing is written to disk.
//
// Presets: "small" (8 dual + 1 single layers, width 512, 8 heads, 4096 codes,
// text width 256, shape embedding 16, bbox, 256 tokens; a width-256 shape
// tokenizer), "v01" and "v05" (the released Cube 3D sizes).
//
// Values by role, so activations stay in a trained model's range: matrices
// [out, in] uniform with variance 1/in; norm weights 1 ± 0.1; the codebook
// [codes, E] ± 1/codes; the Fourier embedder [3, F] with variance F/2 (like
// randn·sqrt(F/2)); the encoder's learned queries ± 1; positional encodings
// [T, W] ± sqrt(3/W) (unit-norm rows on average); biases and other vectors
// ± 0.02. Each value comes from a counter-based hash of (seed, tensor,
// element), so a seed gives the same model on any thread count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inference/core/result.h"
#include "inference/model/config.h"
#include "inference/model/shape_tokenizer.h"
#include "inference/tensor/dtype.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

Result<ModelConfig> preset_model_config(std::string_view preset);

// A tensor that owns its little-endian bytes.
struct OwnedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  TensorToWrite view() const { return {name, dtype, shape, bytes}; }
};

// Every tensor of `tensors` (e.g. expected_shape_tensors(config)) stored as
// `dtype` (F32, F16 or BF16; anything else is F32).
std::vector<OwnedTensor> random_tensors(const std::vector<ExpectedTensor>& tensors, uint64_t seed,
                                        DType dtype = DType::kF32);

// The same values as an open in-memory safetensors file named `name`, built
// in place (multi-gigabyte models never exist twice). `dtype` is F32, F16 or
// BF16.
Result<SafetensorsFile> random_weights_file(const std::vector<ExpectedTensor>& tensors, uint64_t seed, DType dtype,
                                            std::string name);

// The shape tokenizer of a preset ("small", "v01", "v05") with random F32
// weights: occupancy and meshing benchmarks at the real sizes.
Result<ShapeTokenizer> random_shape_tokenizer(std::string_view preset, uint64_t seed);

}  // namespace cubeforge
