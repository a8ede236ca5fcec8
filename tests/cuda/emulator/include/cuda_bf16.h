// bf16 types and conversions for the CPU emulator (see cuda_runtime.h here):
// round to nearest even, as the device's __floats2bfloat162_rn.
#pragma once
#include <cstdint>
#include <cstring>
struct __nv_bfloat16 { uint16_t bits; };
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
inline uint16_t emulator_f32_to_bf16(float f) {
  uint32_t b; std::memcpy(&b, &f, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
  b += 0x7fffu + ((b >> 16) & 1u);
  return uint16_t(b >> 16);
}
inline float __bfloat162float(__nv_bfloat16 h) { uint32_t b = uint32_t(h.bits) << 16; float f; std::memcpy(&f, &b, 4); return f; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {{emulator_f32_to_bf16(a)}, {emulator_f32_to_bf16(b)}}; }
