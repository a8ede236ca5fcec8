// Stored forms of one sequence's attention keys and values, and the
// single-query attention that reads them as stored.
//
// Shapes: C = slots (capacity), G = key/value heads, D = head dim, H = query
// heads (a multiple of G; query head h reads key/value head h / (H / G)).
//
// Formats, each widened to float32 in registers by the attention kernels:
//   kF32   exact;
//   kBF16  keys and values rounded to bfloat16;
//   kFp8   FP8 E4M3 codes with one float32 scale per slot and head (the
//          head's largest magnitude maps to 448, E4M3's largest value);
//   kInt8  the KIVI layout: values as 8-bit codes with a scale per slot and
//          head; keys as 8-bit codes with a scale per channel for each block
//          of 32 slots, quantised when the block is full. Until then a
//          block's keys stay float32 (the residual), so slots must be written
//          in order and a slot of a full block is never rewritten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <optional>
#include <vector>

#include "inference/options/engine_options.h"

namespace cubeforge::cpu {

constexpr int64_t kInt8KeyBlock = 32;  // slots per per-channel key scale
constexpr float kFp8E4M3Max = 448.f;

// FP8 E4M3 (sign, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities): round to nearest even, saturating at ±448.
uint8_t fp8_e4m3_from_f32(float value);
float fp8_e4m3_to_f32(uint8_t code);

struct KvStore {
  KvFormat format = KvFormat::kF32;
  int64_t capacity = 0, heads = 0, head_dim = 0;
  std::vector<std::byte> keys, values;  // [C, G·D] elements of the format (float, bf16 bits, or a byte code)
  std::vector<float> key_scales;        // kFp8: [C, G]; kInt8: [C / 32 rounded up, G·D]
  std::vector<float> value_scales;      // kFp8, kInt8: [C, G]
  std::vector<float> key_residual;      // kInt8: [32, G·D] float32 keys of the block being filled
  int64_t quantized_slots = 0;          // kInt8: slots whose keys are codes (whole blocks)

  KvStore() = default;
  KvStore(KvFormat format, int64_t capacity, int64_t heads, int64_t head_dim);
  int64_t width() const { return heads * head_dim; }
  // Forgets every slot (a new prefill).
  void clear() { quantized_slots = 0; }
  // Bytes attention reads for `slots` slots.
  double bytes_for(int64_t slots) const;
};

// Bytes one slot costs in `format` (keys, values and their scales).
double kv_bytes_per_slot(KvFormat format, int64_t heads, int64_t head_dim);

// Writes one slot's key and value, each [G·D] float32.
void kv_store(KvStore& store, int64_t slot, const float* key, const float* value);
// Reads one slot back as float32 (either pointer may be null).
void kv_load(const KvStore& store, int64_t slot, float* key, float* value);

// One query over slots [0, visible): out[h] = Σ_j softmax_j(scale · q_h·k_jg) · v_jg
// for each query head h (q and out: [H, D]). When `slot_weights` is not null,
// each slot's attention probabilities, summed over the query heads, are
// added to slot_weights[j] (heavy-hitter accounting). Threads take ranges of
// slots and merge their partial softmaxes.
void kv_attention(const KvStore& store, const float* q, int64_t query_heads, float scale, int64_t visible, float* out,
                  float* slot_weights);

}  // namespace cubeforge::cpu
