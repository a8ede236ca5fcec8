// AVX-512 attention kernels over a stored KV cache (kv_cache.h): each slot's
// keys and values are widened to float32 in registers, 16 channels at a time.
//
// FP8 E4M3 codes become F16 bit patterns with two integer operations (the
// sign to bit 15, exponent and mantissa shifted into F16's fields) and are
// widened by the F16 conversion, which handles E4M3's subnormals as F16
// subnormals; the F16 value is the E4M3 value · 2^-8, folded into the scale.
// INT8 keys (a scale per channel and block of 32 slots) are scored against
// the query multiplied by the block's scales, once per block.
// Head dims that are not a multiple of 16 go to the scalar kernels.
#include <immintrin.h>

#include <vector>

#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

namespace {

inline __m512 widen_fp8(const uint8_t* codes) {
  const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i bits = _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(int16_t(0xBFFF)));
  return _mm512_cvtph_ps(bits);
}

inline __m512 widen_int8(const int8_t* codes) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes))));
}

inline __m512 widen_bf16(const uint16_t* bits) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits))), 16));
}

constexpr float kFp8ViaF16 = 256.f;  // E4M3 value / the F16 value of its bit pattern

// One key/value head's 16 channels starting at `index` of slot row `row`, as
// stored (without a per-head scale, which the callers fold in).
template <KvFormat kFormat>
inline __m512 load_cells(const std::byte* base, int64_t index) {
  if constexpr (kFormat == KvFormat::kF32) return _mm512_loadu_ps(reinterpret_cast<const float*>(base) + index);
  else if constexpr (kFormat == KvFormat::kBF16) return widen_bf16(reinterpret_cast<const uint16_t*>(base) + index);
  else if constexpr (kFormat == KvFormat::kFp8) return widen_fp8(reinterpret_cast<const uint8_t*>(base) + index);
  else return widen_int8(reinterpret_cast<const int8_t*>(base) + index);
}

template <KvFormat kFormat>
void scores_typed(const KvStore& s, const float* q, int64_t H, float scale, int64_t begin, int64_t end,
                  float* scores) {
  const int64_t D = s.head_dim, W = s.width(), group = H / s.heads;
  // INT8: the query times the current block's channel scales, per query head.
  thread_local std::vector<float> scaled_query;
  int64_t scaled_block = -1;
  if constexpr (kFormat == KvFormat::kInt8) scaled_query.resize(size_t(H * D));
  for (int64_t j = begin; j < end; ++j) {
    const bool residual = kFormat == KvFormat::kInt8 && j >= s.quantized_slots;
    const float* query = q;
    if constexpr (kFormat == KvFormat::kInt8) {
      if (!residual && j / kInt8KeyBlock != scaled_block) {
        scaled_block = j / kInt8KeyBlock;
        const float* channel_scales = s.key_scales.data() + scaled_block * W;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; d += 16)
            _mm512_storeu_ps(scaled_query.data() + h * D + d,
                             _mm512_mul_ps(_mm512_loadu_ps(q + h * D + d),
                                           _mm512_loadu_ps(channel_scales + (h / group) * D + d)));
      }
      if (!residual) query = scaled_query.data();
    }
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      __m512 acc = _mm512_setzero_ps();
      if (residual) {
        const float* key = s.key_residual.data() + (j - s.quantized_slots) * W + g * D;
        for (int64_t d = 0; d < D; d += 16)
          acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * D + d), _mm512_loadu_ps(key + d), acc);
      } else {
        for (int64_t d = 0; d < D; d += 16)
          acc = _mm512_fmadd_ps(_mm512_loadu_ps(query + h * D + d), load_cells<kFormat>(s.keys.data(), j * W + g * D + d),
                                acc);
      }
      float factor = scale;
      if constexpr (kFormat == KvFormat::kFp8) factor *= s.key_scales[size_t(j * s.heads + g)] * kFp8ViaF16;
      scores[(j - begin) * H + h] = _mm512_reduce_add_ps(acc) * factor;
    }
  }
}

template <KvFormat kFormat>
void values_typed(const KvStore& s, const float* weights, int64_t H, int64_t begin, int64_t end, float* accum) {
  const int64_t D = s.head_dim, W = s.width(), group = H / s.heads;
  for (int64_t j = begin; j < end; ++j) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      float factor = weights[(j - begin) * H + h];
      if constexpr (kFormat == KvFormat::kFp8) factor *= s.value_scales[size_t(j * s.heads + g)] * kFp8ViaF16;
      if constexpr (kFormat == KvFormat::kInt8) factor *= s.value_scales[size_t(j * s.heads + g)];
      const __m512 w = _mm512_set1_ps(factor);
      float* acc = accum + h * D;
      for (int64_t d = 0; d < D; d += 16)
        _mm512_storeu_ps(acc + d,
                         _mm512_fmadd_ps(w, load_cells<kFormat>(s.values.data(), j * W + g * D + d), _mm512_loadu_ps(acc + d)));
    }
  }
}

}  // namespace

void kv_scores_avx512(const KvStore& s, const float* q, int64_t query_heads, float scale, int64_t begin, int64_t end,
                      float* scores) {
  if (s.head_dim % 16 != 0) return kv_scores_generic(s, q, query_heads, scale, begin, end, scores);
  switch (s.format) {
    case KvFormat::kF32: return scores_typed<KvFormat::kF32>(s, q, query_heads, scale, begin, end, scores);
    case KvFormat::kBF16: return scores_typed<KvFormat::kBF16>(s, q, query_heads, scale, begin, end, scores);
    case KvFormat::kFp8: return scores_typed<KvFormat::kFp8>(s, q, query_heads, scale, begin, end, scores);
    case KvFormat::kInt8: return scores_typed<KvFormat::kInt8>(s, q, query_heads, scale, begin, end, scores);
  }
}

void kv_values_avx512(const KvStore& s, const float* weights, int64_t query_heads, int64_t begin, int64_t end,
                      float* accum) {
  if (s.head_dim % 16 != 0) return kv_values_generic(s, weights, query_heads, begin, end, accum);
  switch (s.format) {
    case KvFormat::kF32: return values_typed<KvFormat::kF32>(s, weights, query_heads, begin, end, accum);
    case KvFormat::kBF16: return values_typed<KvFormat::kBF16>(s, weights, query_heads, begin, end, accum);
    case KvFormat::kFp8: return values_typed<KvFormat::kFp8>(s, weights, query_heads, begin, end, accum);
    case KvFormat::kInt8: return values_typed<KvFormat::kInt8>(s, weights, query_heads, begin, end, accum);
  }
}

}  // namespace cubeforge::cpu
