// The GPT's weights on the device, uploaded once per model load.
//
// Matrices keep the precision the model multiplies them in
// (DualStreamGpt::matrix): bf16 as stored or converted, f32 where the
// checkpoint is f32 (f16 is widened to f32, which is exact), Q8 and Q4 codes
// with their scales when the model quantises its decode matrices; the matvec
// kernel streams each of them as it is. Projections that read the same input are fused into
// one matrix so a decode step launches once for them: q, k and v as
// [3d, d] (k and v [2d, d] in the cond_pre_only block's cond stream) with a
// bias of zeros where the checkpoint has none, gate and up as [8d, d] (gate
// rows first, so the SwiGLU matvec reads up at an offset). The token
// embedding is uploaded in f32 with the codebook installed, exactly the
// table the CPU reads. Norm weights and biases are f32.
//
// Shapes: d = width, F = 4d (the MLP), V = codes (vocabulary V + 3).
#pragma once

#include <cstdint>
#include <vector>

#include "inference/cuda/device_memory.h"
#include "inference/model/gpt.h"

namespace cubeforge::cuda {

struct DeviceMatrix {
  DType type = DType::kF32;  // kBF16, kF32, kI8 (Q8 codes) or kU8 (Q4 codes, two per byte)
  int rows = 0, cols = 0;
  int group = 0;  // quantised: weights per scale along a row
  DeviceBuffer<std::uint16_t> bf16;
  DeviceBuffer<float> f32;
  DeviceBuffer<std::uint8_t> codes;
  DeviceBuffer<std::uint16_t> scales, offsets;  // quantised: F16 bits [rows, cols / group]; offsets Q4 only

  bool quantized() const { return type == DType::kI8 || type == DType::kU8; }
  std::size_t row_bytes() const {
    return type == DType::kU8 ? std::size_t(cols) / 2 : std::size_t(cols) * dtype_size(type);
  }
  const void* data() const { return rows_from(0); }
  // Row `row` onwards (the up half of gate_up), and its scales and offsets.
  const void* rows_from(int row) const {
    const std::size_t at = std::size_t(row) * row_bytes();
    if (quantized()) return codes.data() + at;
    return type == DType::kBF16 ? static_cast<const void*>(reinterpret_cast<const std::uint8_t*>(bf16.data()) + at)
                                : static_cast<const void*>(reinterpret_cast<const std::uint8_t*>(f32.data()) + at);
  }
  const std::uint16_t* scales_from(int row) const {
    return scales.size() ? scales.data() + std::size_t(row) * (cols / group) : nullptr;
  }
  const std::uint16_t* offsets_from(int row) const {
    return offsets.size() ? offsets.data() + std::size_t(row) * (cols / group) : nullptr;
  }
  std::size_t bytes() const { return bf16.bytes() + f32.bytes() + codes.bytes() + scales.bytes() + offsets.bytes(); }
};

struct PreAttentionWeights {
  bool has_query = true;
  DeviceMatrix qkv;              // [3d, d] q | k | v, or [2d, d] k | v without a query
  DeviceBuffer<float> qkv_bias;  // [rows of qkv] or empty (no bias anywhere)
  DeviceBuffer<float> q_norm;    // [head_dim] (empty without a query)
  DeviceBuffer<float> k_norm;    // [head_dim]
};

struct PostAttentionWeights {
  DeviceMatrix proj;                 // [d, d]
  DeviceBuffer<float> proj_bias;     // [d] or empty
  DeviceMatrix gate_up;              // [2F, d]: gate rows then up rows
  DeviceBuffer<float> gate_up_bias;  // [2F] or empty
  DeviceMatrix down;                 // [d, F]
  DeviceBuffer<float> down_bias;     // [d] or empty
};

// One transformer block: a dual block has both streams (the last one only
// the cond stream's pre-attention), a single block the shape stream alone.
struct BlockWeights {
  bool dual = true;
  bool cond_pre_only = false;
  PreAttentionWeights pre_x, pre_c;
  PostAttentionWeights post_x, post_c;
};

struct GptWeights {
  GptConfig config;
  std::vector<BlockWeights> blocks;  // dual blocks, then single blocks
  DeviceMatrix lm_head;              // [V + 3, d]
  DeviceBuffer<float> token_embedding;  // [V + 3, d] f32, codebook installed
  std::size_t bytes = 0;             // device memory of all of the above
  std::size_t decode_bytes = 0;      // what one decode step streams (shape stream and lm_head)
  int largest_matrix = 0;            // elements of the largest matrix (prefill's widening scratch)
  bool any_widened = false;          // a matrix in BF16 or quantised: the prefill widens it to f32 first
};

// Uploads `model` (with its codebook installed). Errors name the tensor.
Result<GptWeights> upload_gpt_weights(const DualStreamGpt& model);

// Device bytes upload_gpt_weights() will allocate for this model.
std::size_t gpt_weight_device_bytes(const DualStreamGpt& model);

}  // namespace cubeforge::cuda
