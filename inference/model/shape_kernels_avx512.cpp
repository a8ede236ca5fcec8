// AVX-512 versions of the shape kernels (compiled with AVX-512 flags, called
// only when the CPU has them; see shape_kernels.h for the accuracy argument).
#include <immintrin.h>

// GCC 12's _mm512_reduce_* helpers trip -W(maybe-)uninitialized inside its own header
// (they start from _mm256_undefined_pd()).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "inference/core/thread_pool.h"
#include "inference/model/shape_kernels.h"

namespace cubeforge::shape_kernels {

namespace {

// exp(x) for 16 lanes: Cephes expf. x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in
// two parts so r is exact), a degree-7 polynomial for e^r, then scalef by 2^k,
// which also underflows gracefully for very negative x.
inline __m512 exp16(__m512 x) {
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
inline __m512 erfc16_nonnegative(__m512 z) {
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
inline __m512 gelu16(__m512 x) {
  const __m512 u = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 e = erfc16_nonnegative(u);
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 one_plus_erf = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.f), e), e);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), one_plus_erf);
}

// sin(x) and cos(x) for 16 lanes: Cephes sinf/cosf. |x| = q·π/2 + r with
// |r| ≤ π/4 (π/2 split in three parts so r is accurate for |x| up to about 8192),
// then a polynomial each for sin r and cos r, swapped and signed by quadrant q.
inline void sincos16(__m512 x, __m512* sine, __m512* cosine) {
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

inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : __mmask16((1u << remaining) - 1u);
}

inline __mmask16 mask_of(int64_t remaining) { return remaining <= 0 ? __mmask16(0) : tail_mask(remaining); }

// A row of at most 64 scores (one per latent) held in four registers: one
// load and one store instead of three passes. Same arithmetic, in the same
// order, as the general loop below, so the results are bit for bit the same.
void softmax_row_short(float* row, int64_t n, float scale) {
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

void softmax_row(float* row, int64_t n, float scale) {
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

void fourier_row(const float* weight, const float* carrier, int64_t F, const float* xyz, float* row) {
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

void layer_norm_row(const float* x, int64_t n, float eps, const float* weight, const float* bias, float* y) {
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

// The products below: C[rows, N] = (accumulate ? C : 0) + bias + A[rows, K] · B[K, N],
// B stored [K, N]. Tiles of 4 rows share each load of B and each broadcast of A
// feeds 4 (or 1) FMAs. The accumulators are named variables: GCC keeps an array
// of vectors in memory and stores it back on every step of k.

inline __m512 tile_init(const float* c, const float* bias, bool accumulate, __mmask16 m) {
  __m512 init = accumulate ? _mm512_maskz_loadu_ps(m, c) : _mm512_setzero_ps();
  return bias ? _mm512_add_ps(init, _mm512_maskz_loadu_ps(m, bias)) : init;
}

// 4 rows × 64 columns.
inline void tile_4x64(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K, float* c, int64_t ldc,
                      const float* bias, bool accumulate) {
  const __mmask16 f = 0xffff;
  auto bias_at = [bias](int v) { return bias ? bias + 16 * v : nullptr; };
  __m512 c00 = tile_init(c, bias_at(0), accumulate, f), c01 = tile_init(c + 16, bias_at(1), accumulate, f);
  __m512 c02 = tile_init(c + 32, bias_at(2), accumulate, f), c03 = tile_init(c + 48, bias_at(3), accumulate, f);
  const float* c1 = c + ldc;
  __m512 c10 = tile_init(c1, bias_at(0), accumulate, f), c11 = tile_init(c1 + 16, bias_at(1), accumulate, f);
  __m512 c12 = tile_init(c1 + 32, bias_at(2), accumulate, f), c13 = tile_init(c1 + 48, bias_at(3), accumulate, f);
  const float* c2 = c + 2 * ldc;
  __m512 c20 = tile_init(c2, bias_at(0), accumulate, f), c21 = tile_init(c2 + 16, bias_at(1), accumulate, f);
  __m512 c22 = tile_init(c2 + 32, bias_at(2), accumulate, f), c23 = tile_init(c2 + 48, bias_at(3), accumulate, f);
  const float* c3 = c + 3 * ldc;
  __m512 c30 = tile_init(c3, bias_at(0), accumulate, f), c31 = tile_init(c3 + 16, bias_at(1), accumulate, f);
  __m512 c32 = tile_init(c3 + 32, bias_at(2), accumulate, f), c33 = tile_init(c3 + 48, bias_at(3), accumulate, f);
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    const __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16);
    const __m512 b2 = _mm512_loadu_ps(bk + 32), b3 = _mm512_loadu_ps(bk + 48);
    __m512 x = _mm512_set1_ps(a0[k]);
    c00 = _mm512_fmadd_ps(x, b0, c00), c01 = _mm512_fmadd_ps(x, b1, c01);
    c02 = _mm512_fmadd_ps(x, b2, c02), c03 = _mm512_fmadd_ps(x, b3, c03);
    x = _mm512_set1_ps(a1[k]);
    c10 = _mm512_fmadd_ps(x, b0, c10), c11 = _mm512_fmadd_ps(x, b1, c11);
    c12 = _mm512_fmadd_ps(x, b2, c12), c13 = _mm512_fmadd_ps(x, b3, c13);
    x = _mm512_set1_ps(a2[k]);
    c20 = _mm512_fmadd_ps(x, b0, c20), c21 = _mm512_fmadd_ps(x, b1, c21);
    c22 = _mm512_fmadd_ps(x, b2, c22), c23 = _mm512_fmadd_ps(x, b3, c23);
    x = _mm512_set1_ps(a3[k]);
    c30 = _mm512_fmadd_ps(x, b0, c30), c31 = _mm512_fmadd_ps(x, b1, c31);
    c32 = _mm512_fmadd_ps(x, b2, c32), c33 = _mm512_fmadd_ps(x, b3, c33);
  }
  float* out = c;
  _mm512_storeu_ps(out, c00), _mm512_storeu_ps(out + 16, c01), _mm512_storeu_ps(out + 32, c02);
  _mm512_storeu_ps(out + 48, c03);
  out += ldc;
  _mm512_storeu_ps(out, c10), _mm512_storeu_ps(out + 16, c11), _mm512_storeu_ps(out + 32, c12);
  _mm512_storeu_ps(out + 48, c13);
  out += ldc;
  _mm512_storeu_ps(out, c20), _mm512_storeu_ps(out + 16, c21), _mm512_storeu_ps(out + 32, c22);
  _mm512_storeu_ps(out + 48, c23);
  out += ldc;
  _mm512_storeu_ps(out, c30), _mm512_storeu_ps(out + 16, c31), _mm512_storeu_ps(out + 32, c32);
  _mm512_storeu_ps(out + 48, c33);
}

// 4 rows × up to 16 columns (`m` masks them).
inline void tile_4x16(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K, float* c, int64_t ldc,
                      const float* bias, bool accumulate, __mmask16 m) {
  __m512 c0 = tile_init(c, bias, accumulate, m), c1 = tile_init(c + ldc, bias, accumulate, m);
  __m512 c2 = tile_init(c + 2 * ldc, bias, accumulate, m), c3 = tile_init(c + 3 * ldc, bias, accumulate, m);
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  for (int64_t k = 0; k < K; ++k) {
    const __m512 bk = _mm512_maskz_loadu_ps(m, b + k * ldb);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a0[k]), bk, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a1[k]), bk, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a2[k]), bk, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a3[k]), bk, c3);
  }
  _mm512_mask_storeu_ps(c, m, c0);
  _mm512_mask_storeu_ps(c + ldc, m, c1);
  _mm512_mask_storeu_ps(c + 2 * ldc, m, c2);
  _mm512_mask_storeu_ps(c + 3 * ldc, m, c3);
}

// 8 rows × up to 16 columns: for narrow products (a head's attention output),
// where 4 accumulators would leave the FMA units waiting on each other.
inline void tile_8x16(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K, float* c, int64_t ldc,
                      const float* bias, bool accumulate, __mmask16 m) {
  __m512 c0 = tile_init(c, bias, accumulate, m), c1 = tile_init(c + ldc, bias, accumulate, m);
  __m512 c2 = tile_init(c + 2 * ldc, bias, accumulate, m), c3 = tile_init(c + 3 * ldc, bias, accumulate, m);
  __m512 c4 = tile_init(c + 4 * ldc, bias, accumulate, m), c5 = tile_init(c + 5 * ldc, bias, accumulate, m);
  __m512 c6 = tile_init(c + 6 * ldc, bias, accumulate, m), c7 = tile_init(c + 7 * ldc, bias, accumulate, m);
  for (int64_t k = 0; k < K; ++k) {
    const __m512 bk = _mm512_maskz_loadu_ps(m, b + k * ldb);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), bk, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a[lda + k]), bk, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a[2 * lda + k]), bk, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a[3 * lda + k]), bk, c3);
    c4 = _mm512_fmadd_ps(_mm512_set1_ps(a[4 * lda + k]), bk, c4);
    c5 = _mm512_fmadd_ps(_mm512_set1_ps(a[5 * lda + k]), bk, c5);
    c6 = _mm512_fmadd_ps(_mm512_set1_ps(a[6 * lda + k]), bk, c6);
    c7 = _mm512_fmadd_ps(_mm512_set1_ps(a[7 * lda + k]), bk, c7);
  }
  _mm512_mask_storeu_ps(c, m, c0);
  _mm512_mask_storeu_ps(c + ldc, m, c1);
  _mm512_mask_storeu_ps(c + 2 * ldc, m, c2);
  _mm512_mask_storeu_ps(c + 3 * ldc, m, c3);
  _mm512_mask_storeu_ps(c + 4 * ldc, m, c4);
  _mm512_mask_storeu_ps(c + 5 * ldc, m, c5);
  _mm512_mask_storeu_ps(c + 6 * ldc, m, c6);
  _mm512_mask_storeu_ps(c + 7 * ldc, m, c7);
}

// 1 row × up to 16 columns: the rows left over below a multiple of 4.
inline void tile_1x16(const float* a, const float* b, int64_t ldb, int64_t K, float* c, const float* bias,
                      bool accumulate, __mmask16 m) {
  __m512 c0 = tile_init(c, bias, accumulate, m);
  for (int64_t k = 0; k < K; ++k) c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), _mm512_maskz_loadu_ps(m, b + k * ldb), c0);
  _mm512_mask_storeu_ps(c, m, c0);
}

// C[M, N] (+)= A[M, K] · B[K, N] (+ bias).
void small_gemm(int64_t M, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K, int64_t N, float* c,
                int64_t ldc, const float* bias, bool accumulate) {
  int64_t r = 0;
  if (N <= 16)
    for (; r + 8 <= M; r += 8) tile_8x16(a + r * lda, lda, b, ldb, K, c + r * ldc, ldc, bias, accumulate, tail_mask(N));
  for (; r + 4 <= M; r += 4) {
    const float* ar = a + r * lda;
    float* cr = c + r * ldc;
    int64_t n = 0;
    for (; n + 64 <= N; n += 64) tile_4x64(ar, lda, b + n, ldb, K, cr + n, ldc, bias ? bias + n : nullptr, accumulate);
    for (; n < N; n += 16)
      tile_4x16(ar, lda, b + n, ldb, K, cr + n, ldc, bias ? bias + n : nullptr, accumulate, tail_mask(N - n));
  }
  for (; r < M; ++r)
    for (int64_t n = 0; n < N; n += 16)
      tile_1x16(a + r * lda, b + n, ldb, K, c + r * ldc + n, bias ? bias + n : nullptr, accumulate, tail_mask(N - n));
}

// Points per block of the fused occupancy decoder: its activations (about
// 10·W floats per point) stay in L1/L2 while the weights stream from L2.
constexpr int64_t kOccupancyBlock = 32;

}  // namespace

void fourier_embed_avx512(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out) {
  const int64_t dim = 3 * (2 * num_freqs + 1);
  parallel_for(count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, num_freqs)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) fourier_row(weight, carrier, num_freqs, points + p * 3, out + p * dim);
  });
}

namespace {

// The fused decoder from query_in's output on: `first_layer(begin, rows,
// scratch, out)` writes query_in's output (before SiLU) for points
// [begin, begin + rows) into out [rows, W], with `scratch` room for
// rows × 3(2F+1) floats.
template <class FirstLayer>
void occupancy_decoder_blocks(const OccupancyDecoderWeights& w, const float* keys, const float* values,
                              int64_t latent_count, int64_t count, float* logits, const FirstLayer& first_layer) {
  const int64_t W = w.width, H = w.heads, D = W / H, S = latent_count, hidden = w.hidden;
  const int64_t E = 3 * (2 * w.num_freqs + 1);
  const float scale = 1.0f / std::sqrt(float(D));
  // Keys per head transposed to [D, S]: a head's scores are then a product with
  // S contiguous columns.
  std::vector<float> keys_t(static_cast<size_t>(H * D * S));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) keys_t[size_t((h * D + d) * S + s)] = keys[s * W + h * D + d];
  const int64_t blocks = (count + kOccupancyBlock - 1) / kOccupancyBlock;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    const int64_t R = kOccupancyBlock;
    std::vector<float> buffer(static_cast<size_t>(R * (E + 4 * W + hidden + S)));
    float* embedded = buffer.data();    // [R, E]
    float* x = embedded + R * E;        // [R, W] the residual stream
    float* normed = x + R * W;          // [R, W]
    float* query = normed + R * W;      // [R, W]
    float* attended = query + R * W;    // [R, W]
    float* wide = attended + R * W;     // [R, hidden]: the MLP's hidden layer, first the query_in layer
    float* scores = wide + R * hidden;  // [R, S]
    for (int64_t block = b0; block < b1; ++block) {
      const int64_t begin = block * R, rows = std::min(R, count - begin);
      // query_in → SiLU → query_out.
      first_layer(begin, rows, embedded, wide);
      for (int64_t i = 0; i < rows * W; i += 16) {
        const __m512 v = _mm512_loadu_ps(wide + i);
        const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), v)));
        _mm512_storeu_ps(wide + i, _mm512_div_ps(v, denominator));
      }
      small_gemm(rows, wide, W, w.query_out, W, W, W, x, W, w.query_out_bias, false);
      // x += c_proj(attention(c_q(LN(x)), keys, values)).
      for (int64_t r = 0; r < rows; ++r) layer_norm_row(x + r * W, W, w.layer_eps, nullptr, nullptr, normed + r * W);
      small_gemm(rows, normed, W, w.query, W, W, W, query, W, w.query_bias, false);
      for (int64_t h = 0; h < H; ++h) {
        small_gemm(rows, query + h * D, W, keys_t.data() + h * D * S, S, D, S, scores, S, nullptr, false);
        for (int64_t r = 0; r < rows; ++r) softmax_row(scores + r * S, S, scale);
        small_gemm(rows, scores, S, values + h * D, W, S, D, attended + h * D, W, nullptr, false);
      }
      small_gemm(rows, attended, W, w.proj, W, W, W, x, W, w.proj_bias, true);
      // x += down(GELU(up(LN(x)))).
      for (int64_t r = 0; r < rows; ++r) layer_norm_row(x + r * W, W, w.layer_eps, nullptr, nullptr, normed + r * W);
      small_gemm(rows, normed, W, w.up, hidden, W, hidden, wide, hidden, w.up_bias, false);
      for (int64_t i = 0; i < rows * hidden; i += 16) _mm512_storeu_ps(wide + i, gelu16(_mm512_loadu_ps(wide + i)));
      small_gemm(rows, wide, hidden, w.down, W, hidden, W, x, W, w.down_bias, true);
      // ln_f → head.
      for (int64_t r = 0; r < rows; ++r) {
        layer_norm_row(x + r * W, W, w.final_eps, w.final_norm_weight, w.final_norm_bias, normed + r * W);
        __m512 dot = _mm512_setzero_ps();
        for (int64_t j = 0; j < W; j += 16)
          dot = _mm512_fmadd_ps(_mm512_loadu_ps(normed + r * W + j), _mm512_loadu_ps(w.head + j), dot);
        logits[begin + r] = _mm512_reduce_add_ps(dot) + w.head_bias;
      }
    }
  });
}

}  // namespace

void occupancy_decoder_avx512(const OccupancyDecoderWeights& w, const float* keys, const float* values,
                              int64_t latent_count, const float* points, int64_t count, float* logits) {
  const int64_t W = w.width, E = 3 * (2 * w.num_freqs + 1);
  occupancy_decoder_blocks(w, keys, values, latent_count, count, logits,
                           [&](int64_t begin, int64_t rows, float* embedded, float* out) {
                             for (int64_t r = 0; r < rows; ++r)
                               fourier_row(w.fourier_weight, w.carrier, w.num_freqs, points + (begin + r) * 3,
                                           embedded + r * E);
                             small_gemm(rows, embedded, E, w.query_in, W, E, W, out, W, w.query_in_bias, false);
                           });
}

void occupancy_decoder_grid_avx512(const OccupancyDecoderWeights& w, const float* keys, const float* values,
                                   int64_t latent_count, const float* axis_terms, int64_t axis_points,
                                   const int32_t* ijk, int64_t count, float* logits) {
  const int64_t W = w.width;
  const float* x_terms = axis_terms;
  const float* y_terms = axis_terms + axis_points * W;
  const float* z_terms = axis_terms + 2 * axis_points * W;
  occupancy_decoder_blocks(w, keys, values, latent_count, count, logits,
                           [&](int64_t begin, int64_t rows, float*, float* out) {
                             for (int64_t r = 0; r < rows; ++r) {
                               const int32_t* index = ijk + (begin + r) * 3;
                               const float* tx = x_terms + int64_t(index[0]) * W;
                               const float* ty = y_terms + int64_t(index[1]) * W;
                               const float* tz = z_terms + int64_t(index[2]) * W;
                               for (int64_t j = 0; j < W; j += 16) {
                                 const __m512 sum = _mm512_add_ps(
                                     _mm512_add_ps(_mm512_loadu_ps(tx + j), _mm512_loadu_ps(ty + j)),
                                     _mm512_loadu_ps(tz + j));
                                 _mm512_storeu_ps(out + r * W + j, sum);
                               }
                             }
                           });
}

void layer_norm_avx512(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias,
                       float* y) {
  parallel_for(rows, std::max<int64_t>(1, 32768 / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) layer_norm_row(x + r * n, n, eps, weight, bias, y + r * n);
  });
}

void softmax_rows_avx512(float* scores, int64_t rows, int64_t n, float scale) {
  parallel_for_each(rows, rows * n > 32768, [&](int64_t r) { softmax_row(scores + r * n, n, scale); });
}

void gelu_erf_avx512(float* x, int64_t n) {
  const int64_t blocks = (n + 15) / 16;
  parallel_for_each(blocks, n > 65536, [&](int64_t b) {
    const int64_t j = b * 16;
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(x + j, m, gelu16(_mm512_maskz_loadu_ps(m, x + j)));
  });
}

void silu_avx512(float* x, int64_t n) {
  const int64_t blocks = (n + 15) / 16;
  parallel_for_each(blocks, n > 65536, [&](int64_t b) {
    const int64_t j = b * 16;
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    _mm512_mask_storeu_ps(x + j, m, _mm512_div_ps(v, denominator));
  });
}

}  // namespace cubeforge::shape_kernels
