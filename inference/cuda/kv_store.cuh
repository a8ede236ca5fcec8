// The bf16, fp8 and int8 KV cache forms on the device (kv_cache.h): the codes
// and scales of inference/cpu/kv_cache.cpp, bit for bit, for the stores (the
// store kernel in kv_cache.cu, the fused prologue of attention.cu) and the
// widening loads of attention.cu. The arithmetic is the CPU's, operation for
// operation: IEEE division for the scales and the scaled values,
// round-to-nearest-even (rintf is the CPU's nearbyint in its default rounding
// mode), and maxima of magnitudes, which do not depend on their order.
#pragma once

#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/kv_cache.h"

namespace cubeforge::cuda::detail {

constexpr float kFp8E4M3Max = 448.0f;  // E4M3's largest value: a head's largest magnitude maps to it
constexpr float kInt8Largest = 127.0f;

// cpu::fp8_e4m3_from_f32: round to nearest even, saturating at ±448; NaN stays NaN.
__device__ __forceinline__ uint8_t fp8_e4m3_from_f32(float value) {
  const uint32_t bits = __float_as_uint(value);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const float magnitude = fabsf(value);
  if (isnan(value)) return uint8_t(sign | 0x7Fu);
  uint32_t code;
  if (magnitude >= 464.0f) {
    code = 0x7Eu;  // 448; from 464 on, nearest-even would round to 480, which E4M3 lacks
  } else if (magnitude < 0.015625f) {
    code = uint32_t(rintf(magnitude * 512.0f));  // subnormals: multiples of 2^-9
  } else {
    const uint32_t magnitude_bits = bits & 0x7FFFFFFFu;
    const int exponent = int(magnitude_bits >> 23) - 127;
    const uint32_t mantissa = magnitude_bits & 0x7FFFFFu;
    code = (uint32_t(exponent + 7) << 3) | (mantissa >> 20);
    const uint32_t rest = mantissa & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;
    code = min(code, 0x7Eu);
  }
  return uint8_t(sign | code);
}

// cpu::fp8_e4m3_to_f32, exactly: the code's exponent and mantissa placed in an
// f32 whose exponent is 120 short (a subnormal f32 for E4M3's subnormals),
// then scaled by 2^120, which is exact either way.
__device__ __forceinline__ float fp8_e4m3_to_f32(uint32_t code) {
  if ((code & 0x7Fu) == 0x7Fu) return __uint_as_float(0x7FC00000u);
  const float magnitude = __uint_as_float((code & 0x7Fu) << 20) * 0x1p120f;
  return (code & 0x80u) ? -magnitude : magnitude;
}

// The CPU's int8_code: v / scale rounded to nearest even, clamped to ±127.
__device__ __forceinline__ int8_t int8_code(float v, float scale) {
  return scale > 0.0f ? int8_t(fminf(fmaxf(rintf(v / scale), -kInt8Largest), kInt8Largest)) : int8_t(0);
}

// One (batch row, head) of a cache: its slots' codes and their scales.
struct KvHead {
  void* keys;           // [C, D] codes (bf16 bits for bf16)
  void* values;         // [C, D]
  float* key_scales;    // fp8 [C]; int8 [ceil(C / 32), D]; bf16 none
  float* value_scales;  // fp8, int8 [C]
  float* key_residual;  // int8 [32, D]
};

// D = head_dim at run time below; P, where a function takes it, is the power
// of two the kernel is built for (P ≥ D, see with_padded_head_dim), which
// sizes its registers.
__device__ __forceinline__ KvHead kv_head(void* keys, void* values, const KvCacheScales& scales, KvCacheForm form,
                                          int row_head, int capacity, int D) {
  const size_t slots = size_t(row_head) * capacity;
  const size_t blocks = size_t(row_head) * ((capacity + kInt8KeyBlock - 1) / kInt8KeyBlock);
  KvHead head;
  if (form == KvCacheForm::kBF16) {
    head.keys = static_cast<uint16_t*>(keys) + slots * D;
    head.values = static_cast<uint16_t*>(values) + slots * D;
    head.key_scales = head.value_scales = head.key_residual = nullptr;
    return head;
  }
  head.keys = static_cast<uint8_t*>(keys) + slots * D;
  head.values = static_cast<uint8_t*>(values) + slots * D;
  head.key_scales = form == KvCacheForm::kInt8 ? scales.key_scales + blocks * D : scales.key_scales + slots;
  head.value_scales = scales.value_scales + slots;
  head.key_residual = form == KvCacheForm::kInt8 ? scales.key_residual + size_t(row_head) * kInt8KeyBlock * D : nullptr;
  return head;
}

// One head's D values of one slot with a scale per slot and head (fp8 with
// 448, int8 with 127), by one warp: x is readable by every lane; lane l
// handles elements l, l + 32, ….
template <int P, KvCacheForm Form>
__device__ __forceinline__ void store_head_row(void* codes, float* scale_out, const float* x, int D) {
  constexpr int kPerLane = (P + kWarpSize - 1) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float v[kPerLane];
  float largest = 0.0f;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + t * kWarpSize;
    v[t] = d < D ? x[d] : 0.0f;
    largest = fmaxf(largest, fabsf(v[t]));
  }
  largest = warp_max(largest);
  const float scale = largest / (Form == KvCacheForm::kFp8 ? kFp8E4M3Max : kInt8Largest);
  if (lane == 0) *scale_out = scale;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + t * kWarpSize;
    if (d >= D) continue;
    if constexpr (Form == KvCacheForm::kFp8)
      static_cast<uint8_t*>(codes)[d] = scale > 0.0f ? fp8_e4m3_from_f32(v[t] / scale) : uint8_t(0);
    else
      static_cast<int8_t*>(codes)[d] = int8_code(v[t], scale);
  }
}

// KIVI keys, by one warp: the key goes to the residual's row slot % 32, and
// the block is quantised, channel by channel, when that was its last slot.
// Lane l owns channels l, l + 32, … of the residual, so it reads back only
// what it wrote itself.
__device__ __forceinline__ void store_int8_key(const KvHead& head, int slot, const float* key, int D) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = slot % kInt8KeyBlock;
  for (int c = lane; c < D; c += kWarpSize) head.key_residual[row * D + c] = key[c];
  if (row != kInt8KeyBlock - 1) return;
  const int first = slot - row;
  int8_t* codes = static_cast<int8_t*>(head.keys) + size_t(first) * D;
  float* scales = head.key_scales + size_t(slot / kInt8KeyBlock) * D;
  for (int c = lane; c < D; c += kWarpSize) {
    float largest = 0.0f;
    for (int j = 0; j < kInt8KeyBlock; ++j) largest = fmaxf(largest, fabsf(head.key_residual[j * D + c]));
    const float scale = largest / kInt8Largest;
    scales[c] = scale;
    for (int j = 0; j < kInt8KeyBlock; ++j) codes[j * D + c] = int8_code(head.key_residual[j * D + c], scale);
  }
}

// One head's D values of one slot as bf16 (the CPU's f32_to_bf16), by one warp.
__device__ __forceinline__ void store_bf16_row(void* codes, const float* x, int D) {
  for (int d = threadIdx.x % kWarpSize; d < D; d += kWarpSize) static_cast<uint16_t*>(codes)[d] = bf16_from_f32(x[d]);
}

// cpu::kv_store for one slot of one head, by one warp (every lane calls it).
template <int P, KvCacheForm Form>
__device__ __forceinline__ void store_slot(const KvHead& head, int slot, const float* key, const float* value, int D) {
  static_assert(Form == KvCacheForm::kBF16 || Form == KvCacheForm::kFp8 || Form == KvCacheForm::kInt8);
  if constexpr (Form == KvCacheForm::kBF16) {
    store_bf16_row(static_cast<uint16_t*>(head.keys) + size_t(slot) * D, key, D);
    store_bf16_row(static_cast<uint16_t*>(head.values) + size_t(slot) * D, value, D);
  } else {
    store_head_row<P, Form>(static_cast<uint8_t*>(head.values) + size_t(slot) * D, head.value_scales + slot, value, D);
    if constexpr (Form == KvCacheForm::kFp8)
      store_head_row<P, Form>(static_cast<uint8_t*>(head.keys) + size_t(slot) * D, head.key_scales + slot, key, D);
    else
      store_int8_key(head, slot, key, D);
  }
}

}  // namespace cubeforge::cuda::detail
