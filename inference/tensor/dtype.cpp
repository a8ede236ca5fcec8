// dtype names, sizes and the scalar half-precision conversions.
#include "inference/tensor/dtype.h"

#include <cmath>

namespace cubeforge {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "F64", 8}, {DType::kF32, "F32", 4},  {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2}, {DType::kI8, "I8", 1},     {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
};
}  // namespace

size_t dtype_size(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.size;
  return 0;
}

std::string_view dtype_name(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::kF64 || dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      bits = sign | (uint32_t(127 - 15 - shift + 1) << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (abs_bits >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow to inf
  if (abs_bits < 0x38800000u) {  // subnormal or zero in half
    float af;
    std::memcpy(&af, &abs_bits, 4);
    // Scale so the half subnormal unit becomes 1, then round to nearest even.
    float scaled = af * 16777216.0f;  // 2^24
    uint32_t m = uint32_t(std::nearbyint(scaled));
    return uint16_t(sign | m);
  }
  uint32_t exponent = (abs_bits >> 23) - 127 + 15;
  uint32_t mantissa = abs_bits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into exponent correctly
  return uint16_t(sign | half);
}

void convert_to_f32(DType dtype, const void* src, float* dst, size_t count) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, count * 4);
      return;
    case DType::kF64: {
      const double* s = static_cast<const double*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kI64: {
      const int64_t* s = static_cast<const int64_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::kI32: {
      const int32_t* s = static_cast<const int32_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::kI16: {
      const int16_t* s = static_cast<const int16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::kI8: {
      const int8_t* s = static_cast<const int8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::kU8:
    case DType::kBool: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
      return;
    }
  }
}

}  // namespace cubeforge
