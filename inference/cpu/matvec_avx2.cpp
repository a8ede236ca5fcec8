// AVX2 + FMA matrix-vector kernel (same structure as the AVX-512 one, 8 lanes,
// scalar tail) for x86-64 machines without AVX-512, for F32/F16/BF16 and the
// quantised formats.
#include <immintrin.h>

#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

namespace {

template <DType kType>
inline __m256 load_weights(const void* base, int64_t index) {
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (kType == DType::kBF16) {
    __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  } else {
    __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_cvtph_ps(raw);
  }
}

template <DType kType>
inline float weight_at(const void* base, int64_t index) {
  if constexpr (kType == DType::kF32) return static_cast<const float*>(base)[index];
  else if constexpr (kType == DType::kBF16) return bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
  else return _cvtsh_ss(static_cast<const uint16_t*>(base)[index]);
}

inline float horizontal_sum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 shuf = _mm_movehdup_ps(lo);
  __m128 sums = _mm_add_ps(lo, shuf);
  shuf = _mm_movehl_ps(shuf, sums);
  sums = _mm_add_ss(sums, shuf);
  return _mm_cvtss_f32(sums);
}

template <DType kType, int kBatch>
void matvec_typed(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, const float* bias, float* y,
                  bool accumulate) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  const int64_t k_main = K / 8 * 8;
  constexpr int kRows = 4;
  int64_t n = n_begin;
  auto finish = [&](int64_t row, int b, float v) {
    v += bias ? bias[row] : 0.f;
    float& out = y[b * N + row];
    out = accumulate ? out + v : v;
  };
  for (; n + kRows <= n_end; n += kRows) {
    __m256 acc[kRows][kBatch];
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm256_setzero_ps();
    for (int64_t k = 0; k < k_main; k += 8) {
      __m256 xv[kBatch];
      for (int b = 0; b < kBatch; ++b) xv[b] = _mm256_loadu_ps(x + b * K + k);
      for (int r = 0; r < kRows; ++r) {
        __m256 wv = load_weights<kType>(w.data, (n + r) * K + k);
        for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm256_fmadd_ps(wv, xv[b], acc[r][b]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      for (int b = 0; b < kBatch; ++b) {
        float v = horizontal_sum(acc[r][b]);
        for (int64_t k = k_main; k < K; ++k) v += weight_at<kType>(w.data, (n + r) * K + k) * x[b * K + k];
        finish(n + r, b, v);
      }
    }
  }
  for (; n < n_end; ++n) {
    __m256 acc[kBatch];
    for (int b = 0; b < kBatch; ++b) acc[b] = _mm256_setzero_ps();
    for (int64_t k = 0; k < k_main; k += 8) {
      __m256 wv = load_weights<kType>(w.data, n * K + k);
      for (int b = 0; b < kBatch; ++b) acc[b] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + b * K + k), acc[b]);
    }
    for (int b = 0; b < kBatch; ++b) {
      float v = horizontal_sum(acc[b]);
      for (int64_t k = k_main; k < K; ++k) v += weight_at<kType>(w.data, n * K + k) * x[b * K + k];
      finish(n, b, v);
    }
  }
}

template <DType kType>
void dispatch_batch(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                    const float* bias, float* y, bool accumulate) {
  if (batch == 2)
    matvec_typed<kType, 2>(w, n_begin, n_end, x, bias, y, accumulate);
  else
    matvec_typed<kType, 1>(w, n_begin, n_end, x, bias, y, accumulate);
}

// ---- Quantised weights (quantize.h), 8 lanes: codes widened to int32,
// converted, and scaled (Q8) or scaled and offset in one FMA (Q4). Per 32
// weights, Q4's 16 bytes are two halves of 8: each half's low nibbles are 8
// consecutive weights and its high nibbles the 8 sixteen places on.

template <Quantization kFormat, int kRows, int kBatch>
inline void quantized_dot_rows(const WeightMatrix& w, int64_t n, const float* x, float (&sums)[kRows][kBatch]) {
  const int64_t K = w.cols, groups = K / w.group;
  const int64_t row_bytes = kFormat == Quantization::kQ4 ? K / 2 : K;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const __m256i low_nibble = _mm256_set1_epi32(0xF);
  __m256 acc[kRows][kBatch];
  for (int r = 0; r < kRows; ++r)
    for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256 scale[kRows], offset[kRows];
    for (int r = 0; r < kRows; ++r) {
      scale[r] = _mm256_set1_ps(_cvtsh_ss(w.scales[(n + r) * groups + g]));
      if constexpr (kFormat == Quantization::kQ4) offset[r] = _mm256_set1_ps(_cvtsh_ss(w.offsets[(n + r) * groups + g]));
    }
    for (int64_t k = g * w.group; k < (g + 1) * w.group; k += 32) {
      for (int r = 0; r < kRows; ++r) {
        __m256 v[4];  // weights k + 8i .. k + 8i + 7
        if constexpr (kFormat == Quantization::kQ8) {
          const uint8_t* c = codes + (n + r) * row_bytes + k;
          for (int i = 0; i < 4; ++i)
            v[i] = _mm256_mul_ps(
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * i)))),
                scale[r]);
        } else {
          const uint8_t* c = codes + (n + r) * row_bytes + k / 2;
          for (int half = 0; half < 2; ++half) {
            const __m256i packed = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * half)));
            v[half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(packed, low_nibble)), scale[r], offset[r]);
            v[2 + half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(packed, 4)), scale[r], offset[r]);
          }
        }
        for (int b = 0; b < kBatch; ++b)
          for (int i = 0; i < 4; ++i)
            acc[r][b] = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(x + b * K + k + 8 * i), acc[r][b]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int b = 0; b < kBatch; ++b) sums[r][b] = horizontal_sum(acc[r][b]);
}

template <Quantization kFormat, int kBatch>
void matvec_quantized(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, const float* bias,
                      float* y, bool accumulate) {
  const int64_t N = w.rows;
  auto finish = [&](int64_t row, int b, float v) {
    v += bias ? bias[row] : 0.f;
    float& out = y[b * N + row];
    out = accumulate ? out + v : v;
  };
  constexpr int kRows = 4;
  int64_t n = n_begin;
  for (; n + kRows <= n_end; n += kRows) {
    float sums[kRows][kBatch];
    quantized_dot_rows<kFormat, kRows, kBatch>(w, n, x, sums);
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < kBatch; ++b) finish(n + r, b, sums[r][b]);
  }
  for (; n < n_end; ++n) {
    float sums[1][kBatch];
    quantized_dot_rows<kFormat, 1, kBatch>(w, n, x, sums);
    for (int b = 0; b < kBatch; ++b) finish(n, b, sums[0][b]);
  }
}

template <Quantization kFormat>
void dispatch_quantized_batch(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                              const float* bias, float* y, bool accumulate) {
  if (batch == 2)
    matvec_quantized<kFormat, 2>(w, n_begin, n_end, x, bias, y, accumulate);
  else
    matvec_quantized<kFormat, 1>(w, n_begin, n_end, x, bias, y, accumulate);
}

}  // namespace

void matvec_avx2(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch, const float* bias,
                 float* y, bool accumulate) {
  if (w.quantization == Quantization::kQ8) {
    dispatch_quantized_batch<Quantization::kQ8>(w, n_begin, n_end, x, batch, bias, y, accumulate);
    return;
  }
  if (w.quantization == Quantization::kQ4) {
    dispatch_quantized_batch<Quantization::kQ4>(w, n_begin, n_end, x, batch, bias, y, accumulate);
    return;
  }
  switch (w.dtype) {
    case DType::kBF16: dispatch_batch<DType::kBF16>(w, n_begin, n_end, x, batch, bias, y, accumulate); break;
    case DType::kF16: dispatch_batch<DType::kF16>(w, n_begin, n_end, x, batch, bias, y, accumulate); break;
    default: dispatch_batch<DType::kF32>(w, n_begin, n_end, x, batch, bias, y, accumulate); break;
  }
}

}  // namespace cubeforge::cpu
