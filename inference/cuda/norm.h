// Normalisations of the decode step.
//
// layer_norm_rows: LayerNorm without affine parameters, as the GPT's ln_1, ln_2,
//   ln_3 and ln_f: y = (x − mean) / sqrt(var + eps), statistics in fp32,
//   biased variance (divide by cols), two passes over the row (no E[x²]−E[x]²
//   cancellation).
//
// qk_norm_rope_cache_write: everything between the c_qk / c_v matvecs and the
//   attention kernel for one new token, fused. Per (batch row b, head h):
//     q = RMSNorm(q_raw[b, h]) · q_weight   then RoPE at `position`
//     k = RMSNorm(k_raw[b, h]) · k_weight   then RoPE at `position`
//     key_cache[b, h, slot] = k;  value_cache[b, h, slot] = v_raw[b, h]
//   with RMSNorm x·rsqrt(mean(x²) + eps) (eps 1e-5 in Cube 3D), RoPE on
//   interleaved pairs (x[2i], x[2i+1]) rotated by position·θ^(−2i/head_dim),
//   and slot = position + cache_slot_offset. Positions come from device memory
//   so a captured graph replays unchanged from token to token: the dual-stream
//   blocks pass cache_slot_offset = cond_len (their cache holds the cond tokens
//   first, and shape positions start at 0), the single-stream blocks pass 0.
//   The cache stores rotated keys, which gives the same attention as the
//   reference's re-rotation of the whole cache every step.
//   A slot outside [0, cache_capacity) is not written (the query still is).
//   Prefill passes several tokens per batch row (`tokens`, T) and host
//   positions: token t sits at rotary position first_position + t·position_step
//   (the cond tokens all at 0: step 0) and in slot first_position +
//   cache_slot_offset + t. A rotation by position 0 leaves a pair exactly as
//   it is, so cond rows match the CPU's, which does not rotate them.
//
// Shapes: q_raw, k_raw [batch·T, row_stride] with head h at [h·head_dim, …);
// v_raw likewise; query_out [batch, T, heads, head_dim] f32; caches
// [batch, heads, capacity, head_dim] in bf16 or f32.
#pragma once

#include <vector>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

Status layer_norm_rows(const float* input, int input_stride, float* output, int output_stride, int rows, int cols,
                       float eps, Stream stream);

struct QkNormRopeArgs {
  int batch = 1;
  int heads = 0;
  int head_dim = 0;  // head_dim_supported (cuda_api.h): a multiple of 16 up to 256

  const float* query = nullptr;  // [batch, query_stride] or nullptr (cond_pre_only keys)
  int query_stride = 0;
  const float* key = nullptr;  // [batch, key_stride]
  int key_stride = 0;
  const float* value = nullptr;  // [batch, value_stride]
  int value_stride = 0;

  const float* query_norm_weight = nullptr;  // [head_dim]
  const float* key_norm_weight = nullptr;    // [head_dim]
  float eps = 1e-5f;
  float rope_theta = 10000.0f;

  int tokens = 1;                 // T: consecutive tokens per batch row
  const int* position = nullptr;  // device: rotary position of the (first) token, or nullptr:
  int first_position = 0;         //   then the host's first_position
  int position_step = 1;          //   and step (tokens t at first_position + t·position_step)
  int cache_slot_offset = 0;      // slot = position of token 0 + cache_slot_offset + t

  float* query_out = nullptr;  // [batch, T, heads, head_dim]; required when query is set
  DType cache_type = DType::kBF16;
  void* key_cache = nullptr;    // [batch, heads, cache_capacity, head_dim]
  void* value_cache = nullptr;  // same
  int cache_capacity = 0;
};

Status qk_norm_rope_cache_write(const QkNormRopeArgs& args, Stream stream);

// RoPE inverse frequencies θ^(−2i/head_dim), i < head_dim/2, as the kernel
// computes them (in double, rounded to float), for CPU references.
std::vector<float> rope_inverse_frequencies(int head_dim, float theta);

}  // namespace cubeforge::cuda
