// attention_over_rows (ops.h) on AVX-512: the named key and value rows are
// read where they lie, each once for all the queries, head channels 16 at a
// time; the softmax is the vector-math one. Head sizes that are not a
// multiple of 16 go to the scalar kernel.
#include <algorithm>
#include <cmath>
#include <vector>

#include "inference/cpu/kernels.h"
#include "inference/cpu/vector_math_avx512.h"

namespace cubeforge::cpu {

using namespace avx512;

void attention_over_rows_avx512(const float* q, int64_t rows, const float* keys, const float* values,
                                const int32_t* key_rows, int64_t count, int64_t heads, int64_t head_dim, float* out,
                                float* mass) {
  const int64_t H = heads, D = head_dim, W = H * D;
  if (D % 16 != 0) {
    attention_over_rows_generic(q, rows, keys, values, key_rows, count, heads, head_dim, out, mass);
    return;
  }
  const float scale = 1.0f / std::sqrt(float(D));
  thread_local std::vector<float> weights;  // [rows, H, count]
  weights.resize(size_t(rows * H * count));
  // Scores: each key row against every query, head by head.
  for (int64_t j = 0; j < count; ++j) {
    const float* key = keys + int64_t(key_rows[j]) * W;
    for (int64_t r = 0; r < rows; ++r) {
      const float* query = q + r * W;
      for (int64_t h = 0; h < H; ++h) {
        __m512 dot = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d += 16)
          dot = _mm512_fmadd_ps(_mm512_loadu_ps(query + h * D + d), _mm512_loadu_ps(key + h * D + d), dot);
        weights[size_t((r * H + h) * count + j)] = _mm512_reduce_add_ps(dot) * scale;
      }
    }
  }
  for (int64_t rh = 0; rh < rows * H; ++rh) softmax_row(weights.data() + rh * count, count, 1.f);
  if (mass) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row_mass = mass + r * count;
      const float* first = weights.data() + r * H * count;
      for (int64_t j = 0; j < count; j += 16) {
        const __mmask16 m = tail_mask(count - j);
        __m512 sum = _mm512_maskz_loadu_ps(m, first + j);
        for (int64_t h = 1; h < H; ++h) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, first + h * count + j));
        _mm512_mask_storeu_ps(row_mass + j, m, sum);
      }
    }
  }
  // Weighted values: per query and head, up to 64 channels in registers over
  // every named row (the rows stay in cache from one query to the next).
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const float* p = weights.data() + (r * H + h) * count;
      for (int64_t d0 = 0; d0 < D; d0 += 64) {
        const int64_t lanes = std::min<int64_t>(64, D - d0);
        const __mmask16 m1 = lanes > 16 ? __mmask16(0xffff) : __mmask16(0);
        const __mmask16 m2 = lanes > 32 ? __mmask16(0xffff) : __mmask16(0);
        const __mmask16 m3 = lanes > 48 ? __mmask16(0xffff) : __mmask16(0);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t j = 0; j < count; ++j) {
          const float* value = values + int64_t(key_rows[j]) * W + h * D + d0;
          const __m512 weight = _mm512_set1_ps(p[j]);
          a0 = _mm512_fmadd_ps(weight, _mm512_loadu_ps(value), a0);
          a1 = _mm512_fmadd_ps(weight, _mm512_maskz_loadu_ps(m1, value + 16), a1);
          a2 = _mm512_fmadd_ps(weight, _mm512_maskz_loadu_ps(m2, value + 32), a2);
          a3 = _mm512_fmadd_ps(weight, _mm512_maskz_loadu_ps(m3, value + 48), a3);
        }
        float* o = out + r * W + h * D + d0;
        _mm512_storeu_ps(o, a0);
        _mm512_mask_storeu_ps(o + 16, m1, a1);
        _mm512_mask_storeu_ps(o + 32, m2, a2);
        _mm512_mask_storeu_ps(o + 48, m3, a3);
      }
    }
}

}  // namespace cubeforge::cpu
