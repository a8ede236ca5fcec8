// Random-weight shape tokenizers: every tensor a configuration implies, filled
// with deterministic pseudo-random values of a trained model's scale.
//
// Benchmarks use them to measure the real sizes (v0.5: width 768, 1024
// latents) without a licensed checkpoint, and tests use the tensor list to build
// deliberately broken files. Nothing is written to disk: the safetensors image
// lives in memory and is opened through SafetensorsFile::from_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/model/config.h"
#include "inference/tensor/dtype.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

// A tensor that owns its little-endian bytes.
struct OwnedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

// Every tensor of expected_shape_tensors(config), stored as `dtype` (F32, F16
// or BF16). Matrices are uniform with variance 1/fan_in, norm weights near 1,
// biases small, the codebook like the reference's initialisation.
std::vector<OwnedTensor> random_shape_tensors(const ShapeModelConfig& config, uint64_t seed,
                                              DType dtype = DType::kF32);

// A complete safetensors file image (header, then the tensors in order).
std::vector<std::byte> safetensors_image(std::span<const OwnedTensor> tensors);

// random_shape_tensors() opened as a file named `name`.
Result<SafetensorsFile> random_shape_tokenizer_file(const ShapeModelConfig& config, uint64_t seed,
                                                    DType dtype = DType::kF32,
                                                    const std::string& name = "random shape_tokenizer.safetensors");

}  // namespace cubeforge
