// Random-weight models of the real sizes, for benchmarks without checkpoints.
//
// Presets: "small" (8 dual + 1 single layers, width 512, 8 heads, 4096 codes,
// text width 256, shape embedding 16, bbox, 256 tokens), "v01" and "v05" (the
// released Cube 3D sizes). Values come from a counter-based hash of (seed,
// tensor, element), so the same seed gives the same model on any thread count.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "inference/core/result.h"
#include "inference/model/config.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

Result<ModelConfig> preset_model_config(std::string_view preset);

// An in-memory safetensors image holding random values for `tensors`:
// matrices ~ U(±sqrt(3/fan_in)) (unit-variance outputs), norm weights 1,
// biases small. `dtype` is F32, F16 or BF16.
Result<SafetensorsFile> make_random_weights(const std::vector<ExpectedTensor>& tensors, DType dtype, uint64_t seed,
                                            std::string name);

}  // namespace cubeforge
