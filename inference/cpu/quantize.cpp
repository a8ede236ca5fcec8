// Q8 and Q4 weight formats: quantisation and the scalar definition (see quantize.h).
#include "inference/cpu/quantize.h"

#include <algorithm>
#include <cmath>

namespace cubeforge::cpu {

bool valid_quantization_group(Quantization quantization, int64_t group) {
  switch (quantization) {
    case Quantization::kQ8: return group == kQ8BlockSize;
    case Quantization::kQ4: return group == 32 || group == 64;
    case Quantization::kNone: return false;
  }
  return false;
}

int64_t quantized_row_bytes(Quantization quantization, int64_t cols) {
  return quantization == Quantization::kQ4 ? cols / 2 : cols;
}

size_t WeightMatrix::byte_size() const {
  if (quantization == Quantization::kNone) return size_t(rows) * size_t(cols) * dtype_size(dtype);
  const size_t groups = size_t(rows) * size_t(cols / std::max<int64_t>(1, group));
  const size_t codes = size_t(rows) * size_t(quantized_row_bytes(quantization, cols));
  return codes + groups * sizeof(uint16_t) * (quantization == Quantization::kQ4 ? 2 : 1);
}

uint16_t f16_rounded_up(float x) {
  uint16_t h = f32_to_f16(x);
  if (f16_to_f32(h) >= x) return h;
  if (h == 0x8000) return 0x0001;         // -0 -> the smallest positive value
  return (h & 0x8000) ? uint16_t(h - 1)   // negative: toward zero
                      : uint16_t(h + 1);  // positive: away from zero
}

uint16_t f16_rounded_down(float x) {
  uint16_t h = f32_to_f16(x);
  if (f16_to_f32(h) <= x) return h;
  if (h == 0x0000) return 0x8001;         // +0 -> the negative value nearest zero
  return (h & 0x8000) ? uint16_t(h + 1)   // negative: away from zero
                      : uint16_t(h - 1);  // positive: toward zero
}

bool quantize_rows_q8(const float* values, int64_t rows, int64_t cols, int8_t* codes, uint16_t* scales) {
  const int64_t blocks = cols / kQ8BlockSize;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = values + r * cols + b * kQ8BlockSize;
      int8_t* c = codes + r * cols + b * kQ8BlockSize;
      float largest = 0.f;
      for (int64_t i = 0; i < kQ8BlockSize; ++i) {
        if (!std::isfinite(v[i])) return false;
        largest = std::max(largest, std::fabs(v[i]));
      }
      const uint16_t scale_bits = f16_rounded_up(largest / 127.f);
      const float scale = f16_to_f32(scale_bits);
      if (!std::isfinite(scale)) return false;
      scales[r * blocks + b] = scale_bits;
      for (int64_t i = 0; i < kQ8BlockSize; ++i)
        c[i] = scale > 0.f ? int8_t(std::clamp(std::nearbyint(v[i] / scale), -127.f, 127.f)) : int8_t(0);
    }
  }
  return true;
}

bool quantize_rows_q4(const float* values, int64_t rows, int64_t cols, int64_t group, uint8_t* codes,
                      uint16_t* scales, uint16_t* offsets) {
  const int64_t groups = cols / group;
  uint8_t group_codes[64];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* v = values + r * cols + g * group;
      float low = v[0], high = v[0];
      for (int64_t i = 0; i < group; ++i) {
        if (!std::isfinite(v[i])) return false;
        low = std::min(low, v[i]);
        high = std::max(high, v[i]);
      }
      const uint16_t offset_bits = f16_rounded_down(low);
      const float offset = f16_to_f32(offset_bits);
      const uint16_t scale_bits = f16_rounded_up((high - offset) / 15.f);
      const float scale = f16_to_f32(scale_bits);
      if (!std::isfinite(scale) || !std::isfinite(offset)) return false;
      scales[r * groups + g] = scale_bits;
      offsets[r * groups + g] = offset_bits;
      for (int64_t i = 0; i < group; ++i)
        group_codes[i] = scale > 0.f ? uint8_t(std::clamp(std::nearbyint((v[i] - offset) / scale), 0.f, 15.f)) : 0;
      uint8_t* packed = codes + r * (cols / 2) + g * group / 2;
      for (int64_t p = 0; p < group; p += kQ4PackSize)
        for (int64_t i = 0; i < kQ4PackSize / 2; ++i)
          packed[p / 2 + i] = uint8_t(group_codes[p + i] | (group_codes[p + i + kQ4PackSize / 2] << 4));
    }
  }
  return true;
}

void dequantize_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, float* out) {
  const int64_t K = w.cols, groups = w.cols / w.group;
  for (int64_t r = row_begin; r < row_end; ++r) {
    float* row = out + (r - row_begin) * K;
    const uint16_t* scales = w.scales + r * groups;
    if (w.quantization == Quantization::kQ8) {
      const auto* codes = static_cast<const int8_t*>(w.data) + r * K;
      for (int64_t k = 0; k < K; ++k) row[k] = float(codes[k]) * f16_to_f32(scales[k / w.group]);
    } else {
      const auto* packed = static_cast<const uint8_t*>(w.data) + r * (K / 2);
      const uint16_t* offsets = w.offsets + r * groups;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t pack = k / kQ4PackSize, i = k % kQ4PackSize;
        const uint8_t byte = packed[pack * (kQ4PackSize / 2) + i % (kQ4PackSize / 2)];
        const int code = i < kQ4PackSize / 2 ? byte & 0xF : byte >> 4;
        row[k] = float(code) * f16_to_f32(scales[k / w.group]) + f16_to_f32(offsets[k / w.group]);
      }
    }
  }
}

}  // namespace cubeforge::cpu
