// Element types of stored tensors and exact conversions to float32.
//
// Checkpoints arrive as F32, F16 or BF16 (fixtures also carry integer ids).
// Compute is float32; half-precision weights are widened on the fly, which is
// exact, so a BF16 checkpoint gives the same numbers whether it is widened at
// load time or inside a kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace cubeforge {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // safetensors spelling: "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType dtype);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

// Round to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float f);

// Index of the first NaN or infinity among `count` elements of a float dtype
// at `src` (any alignment), or -1 when all are finite or the dtype is not a
// float type.
int64_t find_non_finite(DType dtype, const void* src, int64_t count);

// Widens `count` elements of `dtype` at `src` (any alignment: a header may
// leave the data section at an odd offset) into float32. Integer types are
// converted by value. Returns false for dtypes with no float meaning (none today).
void convert_to_f32(DType dtype, const void* src, float* dst, size_t count);

}  // namespace cubeforge
