// AVX-512 versions of the vector-math ops (ops.h): the Fourier embedding,
// LayerNorm over float32 lanes, row softmax, GELU and SiLU. Called through the
// kernel table only where the CPU has every AVX-512 feature this file is
// compiled for.
#include <algorithm>

#include "inference/core/thread_pool.h"
#include "inference/cpu/kernels.h"
#include "inference/cpu/vector_math_avx512.h"

namespace cubeforge::cpu {

using namespace avx512;

void fourier_embed_avx512(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out) {
  const int64_t dim = 3 * (2 * num_freqs + 1);
  parallel_for(count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, num_freqs)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) fourier_row(weight, carrier, num_freqs, points + p * 3, out + p * dim);
  });
}

void layer_norm_lanes_avx512(const float* x, int64_t rows, int64_t n, float eps, const float* weight,
                             const float* bias, float* y) {
  parallel_for(rows, std::max<int64_t>(1, 32768 / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) layer_norm_row(x + r * n, n, eps, weight, bias, y + r * n);
  });
}

void softmax_rows_avx512(float* scores, int64_t rows, int64_t n, float scale) {
  parallel_for_each(rows, rows * n > 32768, [&](int64_t r) { softmax_row(scores + r * n, n, scale); });
}

void gelu_erf_lanes_avx512(float* x, int64_t n) {
  const int64_t blocks = (n + 15) / 16;
  parallel_for_each(blocks, n > 65536, [&](int64_t b) {
    const int64_t j = b * 16;
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(x + j, m, gelu16(_mm512_maskz_loadu_ps(m, x + j)));
  });
}

void silu_lanes_avx512(float* x, int64_t n) {
  const int64_t blocks = (n + 15) / 16;
  parallel_for_each(blocks, n > 65536, [&](int64_t b) {
    const int64_t j = b * 16;
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    _mm512_mask_storeu_ps(x + j, m, _mm512_div_ps(v, denominator));
  });
}

}  // namespace cubeforge::cpu
