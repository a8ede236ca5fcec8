// AVX-512 versions of the shape kernels (compiled with AVX-512 flags, called
// only when the CPU has them; see shape_kernels.h for the accuracy argument).
#include <immintrin.h>

// GCC 12's _mm512_reduce_* helpers trip -Wmaybe-uninitialized inside its own header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <limits>

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

inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : __mmask16((1u << remaining) - 1u);
}

void softmax_row(float* row, int64_t n, float scale) {
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

}  // namespace

void softmax_rows_avx512(float* scores, int64_t rows, int64_t n, float scale) {
#pragma omp parallel for schedule(static) if (rows * n > 32768)
  for (int64_t r = 0; r < rows; ++r) softmax_row(scores + r * n, n, scale);
}

void gelu_erf_avx512(float* x, int64_t n) {
  const int64_t blocks = (n + 15) / 16;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j = b * 16;
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(x + j, m, gelu16(_mm512_maskz_loadu_ps(m, x + j)));
  }
}

void silu_avx512(float* x, int64_t n) {
  const int64_t blocks = (n + 15) / 16;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j = b * 16;
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    _mm512_mask_storeu_ps(x + j, m, _mm512_div_ps(v, denominator));
  }
}

}  // namespace cubeforge::shape_kernels
