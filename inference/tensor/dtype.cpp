// dtype names, sizes and the scalar half-precision conversions.
#include "inference/tensor/dtype.h"

#include <algorithm>
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

namespace {

// Elements are loaded with memcpy: tensor data may sit at any byte offset.
template <class T>
T load(const unsigned char* bytes, size_t i) {
  T value;
  std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
  return value;
}

template <class T, class Widen>
void widen_each(const void* src, float* dst, size_t count, Widen widen) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = widen(load<T>(bytes, i));
}

// A float is NaN or infinite exactly when its exponent bits are all ones.
template <class Word>
int64_t find_all_ones_exponent(const void* src, int64_t count, Word exponent_mask) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  constexpr int64_t kBlock = 4096;  // scan a block branch-free, then look inside only when it has one
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t end = std::min(count, begin + kBlock);
    unsigned any = 0;
    for (int64_t i = begin; i < end; ++i) any |= (load<Word>(bytes, size_t(i)) & exponent_mask) == exponent_mask;
    if (!any) continue;
    for (int64_t i = begin; i < end; ++i)
      if ((load<Word>(bytes, size_t(i)) & exponent_mask) == exponent_mask) return i;
  }
  return -1;
}

}  // namespace

int64_t find_non_finite(DType dtype, const void* src, int64_t count) {
  switch (dtype) {
    case DType::kF64: return find_all_ones_exponent<uint64_t>(src, count, 0x7ff0000000000000ull);
    case DType::kF32: return find_all_ones_exponent<uint32_t>(src, count, 0x7f800000u);
    case DType::kF16: return find_all_ones_exponent<uint16_t>(src, count, uint16_t(0x7c00u));
    case DType::kBF16: return find_all_ones_exponent<uint16_t>(src, count, uint16_t(0x7f80u));
    default: return -1;
  }
}

void convert_to_f32(DType dtype, const void* src, float* dst, size_t count) {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, count * 4); return;
    case DType::kF64: widen_each<double>(src, dst, count, [](double v) { return float(v); }); return;
    case DType::kF16: widen_each<uint16_t>(src, dst, count, f16_to_f32); return;
    case DType::kBF16: widen_each<uint16_t>(src, dst, count, bf16_to_f32); return;
    case DType::kI64: widen_each<int64_t>(src, dst, count, [](int64_t v) { return float(v); }); return;
    case DType::kI32: widen_each<int32_t>(src, dst, count, [](int32_t v) { return float(v); }); return;
    case DType::kI16: widen_each<int16_t>(src, dst, count, [](int16_t v) { return float(v); }); return;
    case DType::kI8: widen_each<int8_t>(src, dst, count, [](int8_t v) { return float(v); }); return;
    case DType::kU8:
    case DType::kBool: widen_each<uint8_t>(src, dst, count, [](uint8_t v) { return float(v); }); return;
  }
}

}  // namespace cubeforge
