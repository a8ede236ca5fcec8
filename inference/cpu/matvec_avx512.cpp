// AVX-512 matrix-vector kernel: widens F16/BF16 weights (and dequantises Q8
// and Q4 codes) in registers and keeps 4 output rows x 2 activation rows of
// accumulators in flight, so each weight byte is loaded once and the loop
// runs at memory bandwidth.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

namespace {

template <DType kType>
inline __m512 load_weights(const void* base, int64_t index) {
  if constexpr (kType == DType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (kType == DType::kBF16) {
    __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + index));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  } else {
    __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + index));
    return _mm512_cvtph_ps(raw);
  }
}

template <DType kType>
inline __m512 load_weights_masked(const void* base, int64_t index, __mmask16 mask) {
  if constexpr (kType == DType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(base) + index);
  } else {
    __m256i raw = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + index);
    if constexpr (kType == DType::kBF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
    } else {
      return _mm512_cvtph_ps(raw);
    }
  }
}

template <DType kType>
using Element = std::conditional_t<kType == DType::kF32, float, uint16_t>;

// Software prefetch distance ahead of each weight row's stream.
constexpr int64_t kPrefetchBytes = 512;

template <DType kType, int kBatch>
void matvec_typed(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, const float* bias, float* y,
                  bool accumulate) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  const int64_t k_main = K / 16 * 16;
  const __mmask16 tail_mask = __mmask16((1u << (K - k_main)) - 1u);
  constexpr int kRows = 4;
  // BF16: a 64-byte load holds 32 weights; unpacking its 16-bit halves against
  // zero yields two vectors of float32 bit patterns in one instruction each
  // (no separate widen and shift). Their element order is fixed by the
  // unpack's 128-bit lanes, so the activations are permuted once to match.
  const int64_t k_pairs = kType == DType::kBF16 ? K / 32 * 32 : 0;
  thread_local std::vector<float> permuted;
  if constexpr (kType == DType::kBF16) {
    permuted.resize(size_t(kBatch * k_pairs));
    for (int b = 0; b < kBatch; ++b)
      for (int64_t k = 0; k < k_pairs; k += 32)
        for (int j = 0; j < 16; ++j) {
          const int64_t source = k + 8 * (j / 4) + (j % 4);
          permuted[size_t(b * k_pairs + k + j)] = x[b * K + source];
          permuted[size_t(b * k_pairs + k + 16 + j)] = x[b * K + source + 4];
        }
  }
  int64_t n = n_begin;
  for (; n + kRows <= n_end; n += kRows) {
    __m512 acc[kRows][kBatch];
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm512_setzero_ps();
    int64_t k_start = 0;
    if constexpr (kType == DType::kBF16) {
      const __m512i zero = _mm512_setzero_si512();
      const uint16_t* weights = static_cast<const uint16_t*>(w.data);
      for (int64_t k = 0; k < k_pairs; k += 32) {
        __m512 x_low[kBatch], x_high[kBatch];
        for (int b = 0; b < kBatch; ++b) {
          x_low[b] = _mm512_loadu_ps(permuted.data() + b * k_pairs + k);
          x_high[b] = _mm512_loadu_ps(permuted.data() + b * k_pairs + k + 16);
        }
        for (int r = 0; r < kRows; ++r) {
          const uint16_t* row = weights + (n + r) * K + k;
          _mm_prefetch(reinterpret_cast<const char*>(row) + kPrefetchBytes, _MM_HINT_T0);
          const __m512i raw = _mm512_loadu_si512(row);
          const __m512 low = _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, raw));
          const __m512 high = _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, raw));
          for (int b = 0; b < kBatch; ++b) {
            acc[r][b] = _mm512_fmadd_ps(low, x_low[b], acc[r][b]);
            acc[r][b] = _mm512_fmadd_ps(high, x_high[b], acc[r][b]);
          }
        }
      }
      k_start = k_pairs;
    }
    for (int64_t k = k_start; k < k_main; k += 16) {
      __m512 xv[kBatch];
      for (int b = 0; b < kBatch; ++b) xv[b] = _mm512_loadu_ps(x + b * K + k);
      for (int r = 0; r < kRows; ++r) {
        if constexpr (kPrefetchBytes > 0)
          _mm_prefetch(static_cast<const char*>(w.data) + ((n + r) * K + k) * int64_t(sizeof(Element<kType>)) +
                           kPrefetchBytes,
                       _MM_HINT_T0);
        __m512 wv = load_weights<kType>(w.data, (n + r) * K + k);
        for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm512_fmadd_ps(wv, xv[b], acc[r][b]);
      }
    }
    if (k_main < K) {
      __m512 xv[kBatch];
      for (int b = 0; b < kBatch; ++b) xv[b] = _mm512_maskz_loadu_ps(tail_mask, x + b * K + k_main);
      for (int r = 0; r < kRows; ++r) {
        __m512 wv = load_weights_masked<kType>(w.data, (n + r) * K + k_main, tail_mask);
        for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm512_fmadd_ps(wv, xv[b], acc[r][b]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      for (int b = 0; b < kBatch; ++b) {
        float v = _mm512_reduce_add_ps(acc[r][b]) + (bias ? bias[n + r] : 0.f);
        float& out = y[b * N + n + r];
        out = accumulate ? out + v : v;
      }
    }
  }
  for (; n < n_end; ++n) {
    __m512 acc[kBatch];
    for (int b = 0; b < kBatch; ++b) acc[b] = _mm512_setzero_ps();
    for (int64_t k = 0; k < k_main; k += 16) {
      __m512 wv = load_weights<kType>(w.data, n * K + k);
      for (int b = 0; b < kBatch; ++b) acc[b] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + b * K + k), acc[b]);
    }
    if (k_main < K) {
      __m512 wv = load_weights_masked<kType>(w.data, n * K + k_main, tail_mask);
      for (int b = 0; b < kBatch; ++b)
        acc[b] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(tail_mask, x + b * K + k_main), acc[b]);
    }
    for (int b = 0; b < kBatch; ++b) {
      float v = _mm512_reduce_add_ps(acc[b]) + (bias ? bias[n] : 0.f);
      float& out = y[b * N + n];
      out = accumulate ? out + v : v;
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

// ---- Quantised weights (quantize.h): codes widened to float32 in registers.
// Per 32 weights and row: Q8 widens two vectors of 16 codes and multiplies
// them by the block's scale; Q4 builds the group's 16 possible values
// (code · s + m) in one vector and looks both nibbles of 16 bytes up in it
// with a permute, which reads only an index's low four bits.

template <Quantization kFormat, int kRows, int kBatch>
inline void quantized_dot_rows(const WeightMatrix& w, int64_t n, const float* x, float (&sums)[kRows][kBatch]) {
  const int64_t K = w.cols, groups = K / w.group;
  const int64_t row_bytes = kFormat == Quantization::kQ4 ? K / 2 : K;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  const __m512 code_values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 acc[kRows][kBatch];
  for (int r = 0; r < kRows; ++r)
    for (int b = 0; b < kBatch; ++b) acc[r][b] = _mm512_setzero_ps();
  alignas(64) float scale[kRows][16], offset[kRows][16];
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
    const int64_t chunk = std::min<int64_t>(16, groups - g0);
    const __mmask16 mask = __mmask16((uint32_t(1) << chunk) - 1u);
    for (int r = 0; r < kRows; ++r) {
      const uint16_t* s = w.scales + (n + r) * groups + g0;
      _mm512_store_ps(scale[r], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, s)));
      if constexpr (kFormat == Quantization::kQ4) {
        const uint16_t* m = w.offsets + (n + r) * groups + g0;
        _mm512_store_ps(offset[r], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, m)));
      }
    }
    for (int64_t g = 0; g < chunk; ++g) {
      const int64_t k_begin = (g0 + g) * w.group;
      for (int64_t k = k_begin; k < k_begin + w.group; k += 32) {
        __m512 x_low[kBatch], x_high[kBatch];
        for (int b = 0; b < kBatch; ++b) {
          x_low[b] = _mm512_loadu_ps(x + b * K + k);
          x_high[b] = _mm512_loadu_ps(x + b * K + k + 16);
        }
        for (int r = 0; r < kRows; ++r) {
          __m512 low, high;
          if constexpr (kFormat == Quantization::kQ8) {
            const uint8_t* c = codes + (n + r) * row_bytes + k;
            _mm_prefetch(reinterpret_cast<const char*>(c) + kPrefetchBytes, _MM_HINT_T0);
            const __m512 s = _mm512_set1_ps(scale[r][g]);
            low = _mm512_mul_ps(
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)))), s);
            high = _mm512_mul_ps(
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16)))), s);
          } else {
            const uint8_t* c = codes + (n + r) * row_bytes + k / 2;
            _mm_prefetch(reinterpret_cast<const char*>(c) + kPrefetchBytes, _MM_HINT_T0);
            const __m512 table =
                _mm512_fmadd_ps(code_values, _mm512_set1_ps(scale[r][g]), _mm512_set1_ps(offset[r][g]));
            const __m512i packed = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
            low = _mm512_permutexvar_ps(packed, table);
            high = _mm512_permutexvar_ps(_mm512_srli_epi32(packed, 4), table);
          }
          for (int b = 0; b < kBatch; ++b) {
            acc[r][b] = _mm512_fmadd_ps(low, x_low[b], acc[r][b]);
            acc[r][b] = _mm512_fmadd_ps(high, x_high[b], acc[r][b]);
          }
        }
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int b = 0; b < kBatch; ++b) sums[r][b] = _mm512_reduce_add_ps(acc[r][b]);
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

void matvec_avx512(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                   const float* bias, float* y, bool accumulate) {
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
