// Binding a model's tensors to the CPU op set: a Linear layer over a weight
// matrix that stays in the file in its stored precision, and the binder that
// looks tensors up by name. The GPT and the shape tokenizer both load through
// it; every failure is an error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/cpu/ops.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

// y = x · Wᵀ (+ bias), PyTorch's nn.Linear.
struct Linear {
  cpu::WeightMatrix weight;  // [N, K] in stored precision, zero-copy
  std::vector<float> bias;   // [N] f32; empty when the layer has none

  const float* bias_data() const { return bias.empty() ? nullptr : bias.data(); }
  int64_t out_features() const { return weight.rows; }
  // y[m, N] = x[m, K] · Wᵀ (+ bias).
  void apply(const float* x, int64_t m, float* y) const { cpu::linear(x, m, weight, bias_data(), y); }
  // y[m, N] += x[m, K] · Wᵀ (+ bias): residual adds.
  void accumulate(const float* x, int64_t m, float* y) const { cpu::linear_accumulate(x, m, weight, bias_data(), y); }
};

// Binds tensors of an open file. Callers check the tensor set against the
// configuration first (check_tensor_set), so a failure here means a broken
// invariant of that check; it still travels as an error naming the tensor.
class WeightBinder {
 public:
  // `converted`, when given, holds matrices that take the place of the
  // file's (weight_formats.h: a model converted when it loads).
  explicit WeightBinder(const SafetensorsFile& file, const SafetensorsFile* converted = nullptr)
      : file_(file), converted_(converted) {}

  // A 2-D float tensor (F32, F16 or BF16), or a quantised matrix
  // (weight_formats.h), zero-copy.
  Result<cpu::WeightMatrix> matrix(const std::string& name) const;
  // Any float tensor widened to float32.
  Result<std::vector<float>> vector(const std::string& name) const { return file_.read_f32(name); }
  // PREFIX.weight, and PREFIX.bias when the layer has one.
  Result<Linear> linear(const std::string& prefix, bool with_bias = true) const;

 private:
  const SafetensorsFile& file_;
  const SafetensorsFile* converted_;
};

}  // namespace cubeforge
