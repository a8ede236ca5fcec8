// The fused occupancy decoder on AVX-512 (see occupancy_decoder.h): small
// register-blocked matrix products and the vector-math row kernels, a block
// of points at a time. Called through the kernel table only where the CPU has
// every AVX-512 feature this file is compiled for.
#include <algorithm>
#include <vector>

#include "inference/core/thread_pool.h"
#include "inference/cpu/kernels.h"
#include "inference/cpu/vector_math_avx512.h"

namespace cubeforge::cpu {

using namespace avx512;

namespace {

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

// The fused decoder from query_in's output on: `first_layer(begin, rows,
// scratch, out)` writes query_in's output (before SiLU) for points
// [begin, begin + rows) into out [rows, W], with `scratch` room for
// rows × 3(2F+1) floats.
template <class FirstLayer>
void occupancy_decoder_blocks(const OccupancyDecoderWeights& w, const float* keys, const float* values,
                              int64_t latent_count, int64_t count, float* logits, const LatentAttention& attention,
                              const FirstLayer& first_layer) {
  const int64_t W = w.width, H = w.heads, D = W / H, S = latent_count, hidden = w.hidden;
  const int64_t E = 3 * (2 * w.num_freqs + 1);
  const float scale = 1.0f / std::sqrt(float(D));
  const bool subsets = attention.per_group > 0;
  const int64_t A = subsets ? attention.per_group : S;  // latents each point attends to
  // Keys per head transposed to [D, S]: a head's scores are then a product with
  // S contiguous columns. With subsets each thread gathers them per group.
  std::vector<float> keys_t(subsets ? 0 : static_cast<size_t>(H * D * S));
  for (int64_t s = 0; s < S && !subsets; ++s)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) keys_t[size_t((h * D + d) * S + s)] = keys[s * W + h * D + d];
  const int64_t blocks = (count + kOccupancyBlock - 1) / kOccupancyBlock;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    const int64_t R = kOccupancyBlock;
    std::vector<float> buffer(static_cast<size_t>(R * (E + 4 * W + hidden + A)));
    float* embedded = buffer.data();    // [R, E]
    float* x = embedded + R * E;        // [R, W] the residual stream
    float* normed = x + R * W;          // [R, W]
    float* query = normed + R * W;      // [R, W]
    float* attended = query + R * W;    // [R, W]
    float* wide = attended + R * W;     // [R, hidden]: the MLP's hidden layer, first the query_in layer
    float* scores = wide + R * hidden;  // [R, A]
    // One group's keys ([H, D, A], transposed as above) and values ([A, W]).
    std::vector<float> group_keys(subsets ? static_cast<size_t>(H * D * A) : 0);
    std::vector<float> group_values(subsets ? static_cast<size_t>(A * W) : 0);
    int64_t gathered_group = -1;
    auto gather = [&](int64_t group) {
      const int32_t* chosen = attention.latents + group * A;
      for (int64_t j = 0; j < A; ++j) {
        const float* key = keys + int64_t(chosen[j]) * W;
        for (int64_t hd = 0; hd < W; ++hd) group_keys[size_t(hd * A + j)] = key[hd];
        std::copy_n(values + int64_t(chosen[j]) * W, W, group_values.begin() + j * W);
      }
      gathered_group = group;
    };
    // x's attention output for rows [r0, r1) of the block starting at point
    // `begin`, over `A` latents: keys_by_head [H, D, A], latent_values [A, W].
    auto attend = [&](int64_t begin, int64_t r0, int64_t r1, const float* keys_by_head, const float* latent_values) {
      const int64_t rows = r1 - r0;
      float* row_scores = scores + r0 * A;
      for (int64_t h = 0; h < H; ++h) {
        small_gemm(rows, query + r0 * W + h * D, W, keys_by_head + h * D * A, A, D, A, row_scores, A, nullptr, false);
        for (int64_t r = 0; r < rows; ++r) softmax_row(row_scores + r * A, A, scale);
        if (attention.mass) {
          for (int64_t r = 0; r < rows; ++r) {
            float* mass = attention.mass + (begin + r0 + r) * A;
            const float* weights = row_scores + r * A;
            if (h == 0)
              std::copy_n(weights, A, mass);
            else
              for (int64_t j = 0; j < A; ++j) mass[j] += weights[j];
          }
        }
        small_gemm(rows, row_scores, A, latent_values + h * D, W, A, D, attended + r0 * W + h * D, W, nullptr, false);
      }
    };
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
      if (!subsets) {
        attend(begin, 0, rows, keys_t.data(), values);
      } else {
        // Runs of rows that share a group, each over that group's latents.
        for (int64_t r0 = 0; r0 < rows;) {
          const int64_t group = attention.group[begin + r0];
          int64_t r1 = r0 + 1;
          while (r1 < rows && attention.group[begin + r1] == group) ++r1;
          if (group != gathered_group) gather(group);
          attend(begin, r0, r1, group_keys.data(), group_values.data());
          r0 = r1;
        }
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
                              int64_t latent_count, const float* points, int64_t count, float* logits,
                              const LatentAttention& attention) {
  const int64_t W = w.width, E = 3 * (2 * w.num_freqs + 1);
  occupancy_decoder_blocks(w, keys, values, latent_count, count, logits, attention,
                           [&](int64_t begin, int64_t rows, float* embedded, float* out) {
                             for (int64_t r = 0; r < rows; ++r)
                               fourier_row(w.fourier_weight, w.carrier, w.num_freqs, points + (begin + r) * 3,
                                           embedded + r * E);
                             small_gemm(rows, embedded, E, w.query_in, W, E, W, out, W, w.query_in_bias, false);
                           });
}

void occupancy_decoder_grid_avx512(const OccupancyDecoderWeights& w, const float* keys, const float* values,
                                   int64_t latent_count, const float* axis_terms, int64_t axis_points,
                                   const int32_t* ijk, int64_t count, float* logits, const LatentAttention& attention) {
  const int64_t W = w.width;
  const float* x_terms = axis_terms;
  const float* y_terms = axis_terms + axis_points * W;
  const float* z_terms = axis_terms + 2 * axis_points * W;
  occupancy_decoder_blocks(w, keys, values, latent_count, count, logits, attention,
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

}  // namespace cubeforge::cpu
