// KV cache formats: writing and reading slots, the scalar attention kernels,
// and single-query attention over slot ranges on the pool (see kv_cache.h).
#include "inference/cpu/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "inference/core/result.h"
#include "inference/core/thread_pool.h"
#include "inference/cpu/kernels.h"
#include "inference/tensor/dtype.h"

namespace cubeforge::cpu {

uint8_t fp8_e4m3_from_f32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return uint8_t(sign | 0x7F);
  uint32_t code;
  if (magnitude >= 464.f) {
    code = 0x7E;  // 448; from 464 on, nearest-even would round to 480, which E4M3 lacks
  } else if (magnitude < 0.015625f) {
    // Subnormals are multiples of 2^-9; 8 · 2^-9 is the smallest normal, code 8.
    code = uint32_t(std::nearbyint(magnitude * 512.f));
  } else {
    const uint32_t magnitude_bits = bits & 0x7FFFFFFFu;
    const int exponent = int(magnitude_bits >> 23) - 127;
    const uint32_t mantissa = magnitude_bits & 0x7FFFFFu;
    code = (uint32_t(exponent + 7) << 3) | (mantissa >> 20);
    const uint32_t rest = mantissa & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;  // a carry moves into the exponent, as it should
    code = std::min<uint32_t>(code, 0x7E);
  }
  return uint8_t(sign | code);
}

float fp8_e4m3_to_f32(uint8_t code) {
  const int exponent = (code >> 3) & 0xF, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude =
      exponent == 0 ? std::ldexp(float(mantissa), -9) : std::ldexp(float(8 + mantissa), exponent - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

namespace {

size_t element_size(KvFormat format) {
  switch (format) {
    case KvFormat::kF32: return 4;
    case KvFormat::kBF16: return 2;
    default: return 1;
  }
}

}  // namespace

KvStore::KvStore(KvFormat format_, int64_t capacity_, int64_t heads_, int64_t head_dim_)
    : format(format_), capacity(capacity_), heads(heads_), head_dim(head_dim_) {
  const size_t cells = size_t(capacity) * size_t(width());
  keys.assign(cells * element_size(format), std::byte{0});
  values.assign(cells * element_size(format), std::byte{0});
  if (format == KvFormat::kFp8 || format == KvFormat::kInt8) value_scales.assign(size_t(capacity * heads), 0.f);
  if (format == KvFormat::kFp8) key_scales.assign(size_t(capacity * heads), 0.f);
  if (format == KvFormat::kInt8) {
    key_scales.assign(size_t((capacity + kInt8KeyBlock - 1) / kInt8KeyBlock * width()), 0.f);
    key_residual.assign(size_t(kInt8KeyBlock * width()), 0.f);
  }
}

double kv_bytes_per_slot(KvFormat format, int64_t heads, int64_t head_dim) {
  const double cells = double(heads * head_dim);
  switch (format) {
    case KvFormat::kF32: return 2 * cells * 4;
    case KvFormat::kBF16: return 2 * cells * 2;
    case KvFormat::kFp8: return 2 * cells + 2.0 * double(heads) * 4;
    case KvFormat::kInt8: return 2 * cells + cells * 4 / double(kInt8KeyBlock) + double(heads) * 4;
  }
  return 0;
}

double KvStore::bytes_for(int64_t slots) const { return double(slots) * kv_bytes_per_slot(format, heads, head_dim); }

namespace {

// One head's D values as codes of a per-head scale: the scale maps the
// largest magnitude to `largest_code`.
float head_scale(const float* v, int64_t n, float largest_code) {
  float largest = 0.f;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(v[i]));
  return largest / largest_code;
}

int8_t int8_code(float v, float scale) {
  return scale > 0.f ? int8_t(std::clamp(std::nearbyint(v / scale), -127.f, 127.f)) : int8_t(0);
}

void store_row(KvStore& s, std::byte* base, float* scales, int64_t slot, const float* row) {
  const int64_t W = s.width(), D = s.head_dim;
  switch (s.format) {
    case KvFormat::kF32:
      std::memcpy(base + size_t(slot * W) * 4, row, size_t(W) * 4);
      break;
    case KvFormat::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(base) + slot * W;
      for (int64_t i = 0; i < W; ++i) out[i] = f32_to_bf16(row[i]);
      break;
    }
    case KvFormat::kFp8: {
      auto* out = reinterpret_cast<uint8_t*>(base) + slot * W;
      for (int64_t g = 0; g < s.heads; ++g) {
        const float scale = head_scale(row + g * D, D, kFp8E4M3Max);
        scales[slot * s.heads + g] = scale;
        for (int64_t d = 0; d < D; ++d)
          out[g * D + d] = scale > 0.f ? fp8_e4m3_from_f32(row[g * D + d] / scale) : uint8_t(0);
      }
      break;
    }
    case KvFormat::kInt8: {
      auto* out = reinterpret_cast<int8_t*>(base) + slot * W;
      for (int64_t g = 0; g < s.heads; ++g) {
        const float scale = head_scale(row + g * D, D, 127.f);
        scales[slot * s.heads + g] = scale;
        for (int64_t d = 0; d < D; ++d) out[g * D + d] = int8_code(row[g * D + d], scale);
      }
      break;
    }
  }
}

// KIVI keys: the full block's channels, each with its own scale.
void quantize_key_block(KvStore& s) {
  const int64_t W = s.width(), block = s.quantized_slots / kInt8KeyBlock;
  float* scales = s.key_scales.data() + block * W;
  auto* out = reinterpret_cast<int8_t*>(s.keys.data()) + s.quantized_slots * W;
  for (int64_t c = 0; c < W; ++c) {
    float largest = 0.f;
    for (int64_t j = 0; j < kInt8KeyBlock; ++j) largest = std::max(largest, std::fabs(s.key_residual[size_t(j * W + c)]));
    scales[c] = largest / 127.f;
    for (int64_t j = 0; j < kInt8KeyBlock; ++j) out[j * W + c] = int8_code(s.key_residual[size_t(j * W + c)], scales[c]);
  }
  s.quantized_slots += kInt8KeyBlock;
}

}  // namespace

void kv_store(KvStore& s, int64_t slot, const float* key, const float* value) {
  CUBEFORGE_CHECK(slot >= 0 && slot < s.capacity, "KV slot outside the cache");
  store_row(s, s.values.data(), s.value_scales.data(), slot, value);
  if (s.format != KvFormat::kInt8) {
    store_row(s, s.keys.data(), s.key_scales.data(), slot, key);
    return;
  }
  CUBEFORGE_CHECK(slot >= s.quantized_slots && slot < s.quantized_slots + kInt8KeyBlock,
                  "INT8 KV slots are written in order");
  const int64_t W = s.width();
  std::memcpy(s.key_residual.data() + (slot - s.quantized_slots) * W, key, size_t(W) * 4);
  if (slot - s.quantized_slots == kInt8KeyBlock - 1) quantize_key_block(s);
}

namespace {

void load_row(const KvStore& s, const std::byte* base, const float* scales, int64_t slot, float* row) {
  const int64_t W = s.width(), D = s.head_dim;
  switch (s.format) {
    case KvFormat::kF32:
      std::memcpy(row, base + size_t(slot * W) * 4, size_t(W) * 4);
      break;
    case KvFormat::kBF16: {
      const auto* in = reinterpret_cast<const uint16_t*>(base) + slot * W;
      for (int64_t i = 0; i < W; ++i) row[i] = bf16_to_f32(in[i]);
      break;
    }
    case KvFormat::kFp8: {
      const auto* in = reinterpret_cast<const uint8_t*>(base) + slot * W;
      for (int64_t i = 0; i < W; ++i) row[i] = fp8_e4m3_to_f32(in[i]) * scales[slot * s.heads + i / D];
      break;
    }
    case KvFormat::kInt8: {
      const auto* in = reinterpret_cast<const int8_t*>(base) + slot * W;
      for (int64_t i = 0; i < W; ++i) row[i] = float(in[i]) * scales[slot * s.heads + i / D];
      break;
    }
  }
}

}  // namespace

void kv_load(const KvStore& s, int64_t slot, float* key, float* value) {
  if (value) load_row(s, s.values.data(), s.value_scales.data(), slot, value);
  if (!key) return;
  if (s.format != KvFormat::kInt8) {
    load_row(s, s.keys.data(), s.key_scales.data(), slot, key);
    return;
  }
  const int64_t W = s.width();
  if (slot >= s.quantized_slots) {
    std::memcpy(key, s.key_residual.data() + (slot - s.quantized_slots) * W, size_t(W) * 4);
    return;
  }
  const auto* in = reinterpret_cast<const int8_t*>(s.keys.data()) + slot * W;
  const float* scales = s.key_scales.data() + slot / kInt8KeyBlock * W;
  for (int64_t c = 0; c < W; ++c) key[c] = float(in[c]) * scales[c];
}

void kv_scores_generic(const KvStore& s, const float* q, int64_t query_heads, float scale, int64_t begin,
                       int64_t end, float* scores) {
  const int64_t D = s.head_dim, group = query_heads / s.heads;
  std::vector<float> key(size_t(s.width()));
  for (int64_t j = begin; j < end; ++j) {
    kv_load(s, j, key.data(), nullptr);
    for (int64_t h = 0; h < query_heads; ++h) {
      const float* kh = key.data() + (h / group) * D;
      const float* qh = q + h * D;
      float dot = 0.f;
      for (int64_t d = 0; d < D; ++d) dot += qh[d] * kh[d];
      scores[(j - begin) * query_heads + h] = dot * scale;
    }
  }
}

void kv_values_generic(const KvStore& s, const float* weights, int64_t query_heads, int64_t begin, int64_t end,
                       float* accum) {
  const int64_t D = s.head_dim, group = query_heads / s.heads;
  std::vector<float> value(size_t(s.width()));
  for (int64_t j = begin; j < end; ++j) {
    kv_load(s, j, nullptr, value.data());
    for (int64_t h = 0; h < query_heads; ++h) {
      const float w = weights[(j - begin) * query_heads + h];
      const float* vh = value.data() + (h / group) * D;
      float* acc = accum + h * D;
      for (int64_t d = 0; d < D; ++d) acc[d] += w * vh[d];
    }
  }
}

void kv_attention(const KvStore& s, const float* q, int64_t query_heads, float scale, int64_t visible, float* out,
                  float* slot_weights) {
  const int64_t H = query_heads, D = s.head_dim;
  if (visible <= 0) {
    std::fill(out, out + H * D, 0.f);
    return;
  }
  const Kernels& k = kernels();
  // Slot ranges per thread once the cache is large enough to pay for the hand-over.
  const int64_t shares = visible * H * D < (int64_t(1) << 18)
                             ? 1
                             : std::min<int64_t>(ThreadPool::global().size(), std::max<int64_t>(1, visible / 64));
  std::vector<float> scores(size_t(visible * H));
  std::vector<float> maxima(size_t(shares * H)), sums(size_t(shares * H)), accums(size_t(shares * H * D));
  parallel_for(shares, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t share = s0; share < s1; ++share) {
      const int64_t begin = visible * share / shares, end = visible * (share + 1) / shares;
      float* part = scores.data() + begin * H;
      float* maximum = maxima.data() + share * H;
      float* sum = sums.data() + share * H;
      float* accum = accums.data() + share * H * D;
      std::fill(maximum, maximum + H, -std::numeric_limits<float>::infinity());
      std::fill(sum, sum + H, 0.f);
      std::fill(accum, accum + H * D, 0.f);
      if (begin == end) continue;
      k.kv_scores(s, q, H, scale, begin, end, part);
      for (int64_t j = 0; j < end - begin; ++j)
        for (int64_t h = 0; h < H; ++h) maximum[h] = std::max(maximum[h], part[j * H + h]);
      for (int64_t j = 0; j < end - begin; ++j)
        for (int64_t h = 0; h < H; ++h) {
          const float w = std::exp(part[j * H + h] - maximum[h]);
          part[j * H + h] = w;
          sum[h] += w;
        }
      k.kv_values(s, part, H, begin, end, accum);
    }
  });
  for (int64_t h = 0; h < H; ++h) {
    float overall = -std::numeric_limits<float>::infinity();
    for (int64_t share = 0; share < shares; ++share) overall = std::max(overall, maxima[size_t(share * H + h)]);
    double total = 0.0;
    float* o = out + h * D;
    std::fill(o, o + D, 0.f);
    for (int64_t share = 0; share < shares; ++share) {
      if (sums[size_t(share * H + h)] == 0.f) continue;
      const float rescale = std::exp(maxima[size_t(share * H + h)] - overall);
      total += double(sums[size_t(share * H + h)]) * rescale;
      const float* acc = accums.data() + (share * H + h) * D;
      for (int64_t d = 0; d < D; ++d) o[d] += acc[d] * rescale;
    }
    const float inverse = float(1.0 / total);
    for (int64_t d = 0; d < D; ++d) o[d] *= inverse;
    if (!slot_weights) continue;
    // Each share's weights are relative to its own maximum: bring them to
    // probabilities of the whole softmax.
    for (int64_t share = 0; share < shares; ++share) {
      const int64_t begin = visible * share / shares, end = visible * (share + 1) / shares;
      if (begin == end) continue;
      const float factor = std::exp(maxima[size_t(share * H + h)] - overall) * inverse;
      for (int64_t j = begin; j < end; ++j) slot_weights[j] += scores[size_t(j * H + h)] * factor;
    }
  }
}

}  // namespace cubeforge::cpu
