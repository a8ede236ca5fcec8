// Vector math for 16 float32 lanes, shared by the AVX-512 kernel files
// (elementwise_avx512.cpp, occupancy_decoder_avx512.cpp): exp, erfc, GELU,
// sin/cos, and the row kernels (softmax, Fourier embedding, LayerNorm) both
// files run. Include it only from files compiled for AVX-512; the functions
// are static, so each of those files keeps its own copy, as when they were
// one file's.
//
// Accuracy: exp, sin and cos are Cephes' single-precision polynomials (about
// 1 ulp for the arguments the shape tokenizer's layers see) and erfc is a
// Chebyshev fit (fractional error below 1.2e-7), so results agree with the
// scalar libm loops to float32 rounding.
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512DQ__)
#error "vector_math_avx512.h belongs to the *_avx512.cpp files, which are compiled for AVX-512"
#endif

#include <immintrin.h>

// GCC 12's _mm512_reduce_* helpers trip -W(maybe-)uninitialized inside its own header
// (they start from _mm256_undefined_pd()).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

namespace cubeforge::cpu::avx512 {

// exp(x) for 16 lanes: Cephes expf. x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in
// two parts so r is exact), a degree-7 polynomial for e^r, then scalef by 2^k,
// which also underflows gracefully for very negative x.
static inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-88.3762626647949f)), _mm512_set1_ps(88.3762626647949f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, k);
}

// erfc(z) for z ≥ 0 with fractional error below 1.2e-7 everywhere (the
// Chebyshev-fitted form t·exp(-z² + P(t)), t = 1/(1 + z/2)).
static inline __m512 erfc16_nonnegative(__m512 z) {
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.f)));
  __m512 p = _mm512_set1_ps(0.17087277f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.82215223f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.48851587f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.13520398f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.27886807f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.18628806f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.09678418f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.37409196f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.00002368f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.26551223f));
  const __m512 exponent = _mm512_fnmadd_ps(z, z, p);  // -z² + P(t)
  return _mm512_mul_ps(t, exp16(exponent));
}

// GELU(x) = 0.5·x·(1 + erf(x/√2)). With u = |x|/√2 and e = erfc(u), 1 + erf is
// e for negative x and 2 − e otherwise, so nothing cancels in either tail.
static inline __m512 gelu16(__m512 x) {
  const __m512 u = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 e = erfc16_nonnegative(u);
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 one_plus_erf = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.f), e), e);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), one_plus_erf);
}

// sin(x) and cos(x) for 16 lanes: Cephes sinf/cosf. |x| = q·π/2 + r with
// |r| ≤ π/4 (π/2 split in three parts so r is accurate for |x| up to about 8192),
// then a polynomial each for sin r and cos r, swapped and signed by quadrant q.
static inline void sincos16(__m512 x, __m512* sine, __m512* cosine) {
  const __m512 a = _mm512_abs_ps(x);
  // q = round-to-even-up(|x|·4/π) / 2, as Cephes' (j + 1) & ~1.
  const __m512i j = _mm512_and_si512(
      _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(1.27323954473516f))), _mm512_set1_epi32(1)),
      _mm512_set1_epi32(~1));
  const __m512 y = _mm512_cvtepi32_ps(j);
  __m512 r = _mm512_fnmadd_ps(y, _mm512_set1_ps(0.78515625f), a);
  r = _mm512_fnmadd_ps(y, _mm512_set1_ps(2.4187564849853515625e-4f), r);
  r = _mm512_fnmadd_ps(y, _mm512_set1_ps(3.77489497744594108e-8f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 s = _mm512_set1_ps(-1.9515295891e-4f);
  s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(8.3321608736e-3f));
  s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-1.6666654611e-1f));
  s = _mm512_fmadd_ps(_mm512_mul_ps(s, z), r, r);
  __m512 c = _mm512_set1_ps(2.443315711809948e-5f);
  c = _mm512_fmadd_ps(c, z, _mm512_set1_ps(-1.388731625493765e-3f));
  c = _mm512_fmadd_ps(c, z, _mm512_set1_ps(4.166664568298827e-2f));
  c = _mm512_fmadd_ps(_mm512_mul_ps(c, z), z, _mm512_fnmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.f)));
  const __m512i q = _mm512_srli_epi32(j, 1);
  const __mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
  const __mmask16 negative_x = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __mmask16 sine_negative = _mm512_test_epi32_mask(q, _mm512_set1_epi32(2)) ^ negative_x;
  const __mmask16 cosine_negative =
      _mm512_test_epi32_mask(_mm512_add_epi32(q, _mm512_set1_epi32(1)), _mm512_set1_epi32(2));
  const __m512 sin_x = _mm512_mask_blend_ps(swap, s, c);
  const __m512 cos_x = _mm512_mask_blend_ps(swap, c, s);
  const __m512 sign = _mm512_set1_ps(-0.f);
  *sine = _mm512_mask_xor_ps(sin_x, sine_negative, sin_x, sign);
  *cosine = _mm512_mask_xor_ps(cos_x, cosine_negative, cos_x, sign);
}

static inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : __mmask16((1u << remaining) - 1u);
}

static inline __mmask16 mask_of(int64_t remaining) { return remaining <= 0 ? __mmask16(0) : tail_mask(remaining); }

// A row of at most 64 scores (one per latent) held in four registers: one
// load and one store instead of three passes. Same arithmetic, in the same
// order, as the general loop below, so the results are bit for bit the same.
static void softmax_row_short(float* row, int64_t n, float scale) {
  const __m512 scale16 = _mm512_set1_ps(scale);
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 m0 = mask_of(n), m1 = mask_of(n - 16), m2 = mask_of(n - 32), m3 = mask_of(n - 48);
  const __m512 r0 = _mm512_maskz_loadu_ps(m0, row), r1 = _mm512_maskz_loadu_ps(m1, row + 16);
  const __m512 r2 = _mm512_maskz_loadu_ps(m2, row + 32), r3 = _mm512_maskz_loadu_ps(m3, row + 48);
  const __m512 max01 = _mm512_max_ps(_mm512_mask_mul_ps(lowest, m0, r0, scale16), _mm512_mask_mul_ps(lowest, m1, r1, scale16));
  const __m512 max23 = _mm512_max_ps(_mm512_mask_mul_ps(lowest, m2, r2, scale16), _mm512_mask_mul_ps(lowest, m3, r3, scale16));
  const __m512 max_value = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(max01, max23)));
  const __m512 e0 = _mm512_maskz_mov_ps(m0, exp16(_mm512_fmsub_ps(r0, scale16, max_value)));
  const __m512 e1 = _mm512_maskz_mov_ps(m1, exp16(_mm512_fmsub_ps(r1, scale16, max_value)));
  const __m512 e2 = _mm512_maskz_mov_ps(m2, exp16(_mm512_fmsub_ps(r2, scale16, max_value)));
  const __m512 e3 = _mm512_maskz_mov_ps(m3, exp16(_mm512_fmsub_ps(r3, scale16, max_value)));
  // The general loop adds the vectors into its sum one after another.
  const __m512 sum16 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(e0, e1), e2), e3);
  const __m512 inverse = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum16));
  _mm512_mask_storeu_ps(row, m0, _mm512_mul_ps(e0, inverse));
  _mm512_mask_storeu_ps(row + 16, m1, _mm512_mul_ps(e1, inverse));
  _mm512_mask_storeu_ps(row + 32, m2, _mm512_mul_ps(e2, inverse));
  _mm512_mask_storeu_ps(row + 48, m3, _mm512_mul_ps(e3, inverse));
}

static void softmax_row(float* row, int64_t n, float scale) {
  if (n <= 64) {
    softmax_row_short(row, n, scale);
    return;
  }
  const __m512 scale16 = _mm512_set1_ps(scale);
  __m512 max16 = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + j), scale16);
    max16 = _mm512_mask_max_ps(max16, m, max16, v);
  }
  const __m512 max_value = _mm512_set1_ps(_mm512_reduce_max_ps(max16));
  __m512 sum16 = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, row + j), scale16, max_value);
    const __m512 e = exp16(v);
    sum16 = _mm512_mask_add_ps(sum16, m, sum16, e);
    _mm512_mask_storeu_ps(row + j, m, e);
  }
  const __m512 inverse = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum16));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(row + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + j), inverse));
  }
}

static void fourier_row(const float* weight, const float* carrier, int64_t F, const float* xyz, float* row) {
  float* cosines = row + 3;
  float* sines = row + 3 + 3 * F;
  const __m512 half_pi = _mm512_set1_ps(0.5f * std::numbers::pi_v<float>);
  for (int i = 0; i < 3; ++i) {
    row[i] = xyz[i];
    const __m512 coordinate = _mm512_set1_ps(xyz[i]);
    // (p·0.5)·π in float32, the reference's order (0.5·π is exact in float32 either way).
    const __m512 phase = _mm512_mul_ps(coordinate, half_pi);
    for (int64_t f = 0; f < F; f += 16) {
      const __mmask16 m = tail_mask(F - f);
      const __m512 modulated = _mm512_mul_ps(coordinate, _mm512_maskz_loadu_ps(m, weight + i * F + f));
      const __m512 carried = _mm512_add_ps(phase, _mm512_maskz_loadu_ps(m, carrier + f));
      __m512 sin_modulated, cos_modulated, sin_carried, cos_carried;
      sincos16(modulated, &sin_modulated, &cos_modulated);
      sincos16(carried, &sin_carried, &cos_carried);
      _mm512_mask_storeu_ps(cosines + i * F + f, m, _mm512_add_ps(cos_modulated, cos_carried));
      _mm512_mask_storeu_ps(sines + i * F + f, m, _mm512_add_ps(sin_modulated, sin_carried));
    }
  }
}

static void layer_norm_row(const float* x, int64_t n, float eps, const float* weight, const float* bias, float* y) {
  __m512 sum16 = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) sum16 = _mm512_add_ps(sum16, _mm512_maskz_loadu_ps(tail_mask(n - j), x + j));
  const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(sum16) / float(n));
  __m512 square16 = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + j), mean);
    square16 = _mm512_fmadd_ps(d, d, square16);
  }
  const __m512 inverse = _mm512_set1_ps(1.f / std::sqrt(_mm512_reduce_add_ps(square16) / float(n) + eps));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), mean), inverse);
    if (weight) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + j));
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j));
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}

}  // namespace cubeforge::cpu::avx512
