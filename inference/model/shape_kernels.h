// Elementwise kernels of the occupancy hot path: the Fourier embedding of query
// points, row softmax, exact-erf GELU, SiLU.
//
// An occupancy query spends as much time in exp (softmax over 1024 latents per
// head) and erf (the 4·width MLP) as in its matrix products when those run
// through libm one value at a time. These kernels evaluate 16 lanes at once
// on AVX-512 (chosen at run time; other CPUs take the scalar libm path). The
// vector exp, sin and cos are Cephes' single-precision polynomials (about 1 ulp
// for the arguments these layers see) and erfc is a Chebyshev fit (fractional
// error below 1.2e-7), so results agree with the scalar path to float32 rounding.
#pragma once

#include <cstdint>

namespace cubeforge::shape_kernels {

// The phase-modulated Fourier embedding of `count` points (xyz rows) with F =
// num_freqs frequencies; out rows hold 3(2F+1) values:
//   [x, y, z, cos(p_i·w_if) + cos(p_i·π/2 + carrier_f) (3F), the same with sin (3F)]
// with weight [3, F] and carrier [F]; arguments are formed in float32 in the
// reference's order. At width 64 the 96 sin/cos pairs per point cost as much as
// the point's first matrix product when libm evaluates them one at a time.
void fourier_embed(const float* weight, const float* carrier, int64_t num_freqs, const float* points, int64_t count,
                   float* out);

// Each of `rows` rows of n values: y = (x − mean) / sqrt(var + eps) · weight + bias
// (weight and bias may be null). Sums run in float32 over 16 lanes, where the
// general cpu::layer_norm sums one value at a time in double precision: the
// occupancy decoder normalises three 64-wide rows per query point.
void layer_norm(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias, float* y);

// Each of `rows` rows of n values (row stride n) becomes softmax(scale · row).
void softmax_rows(float* scores, int64_t rows, int64_t n, float scale);

// x = 0.5 · x · (1 + erf(x / √2)) over n values.
void gelu_erf(float* x, int64_t n);

// x = x / (1 + exp(-x)) over n values.
void silu(float* x, int64_t n);

// The occupancy decoder, fused: for each query point, Fourier embedding →
// query_in (SiLU) → query_out → one cross-attention layer over prepared latent
// keys/values (LN → c_q → softmax attention → c_proj, then LN → up → GELU →
// down, both residual) → ln_f → a single-logit head. Blocks of a few dozen
// points run every step in cache with register-blocked products, where the
// layer-at-a-time path sends thin matrices through BLAS (packing, clearing and
// a hand-over per product, a third of its time at width 64). Linear weights are
// float32 stored transposed, [in, out]; biases may be null.
struct OccupancyDecoderWeights {
  int64_t width = 0, heads = 0, hidden = 0, num_freqs = 0;
  float layer_eps = 0.f;  // the cross-attention layer's two LayerNorms
  float final_eps = 0.f;  // ln_f
  const float* fourier_weight = nullptr;  // [3, F]
  const float* carrier = nullptr;         // [F]
  const float *query_in = nullptr, *query_in_bias = nullptr;    // [3(2F+1), W]
  const float *query_out = nullptr, *query_out_bias = nullptr;  // [W, W]
  const float *query = nullptr, *query_bias = nullptr;          // [W, W]
  const float *proj = nullptr, *proj_bias = nullptr;            // [W, W]
  const float *up = nullptr, *up_bias = nullptr;                // [W, hidden]
  const float *down = nullptr, *down_bias = nullptr;            // [hidden, W]
  const float *final_norm_weight = nullptr, *final_norm_bias = nullptr;  // [W]
  const float* head = nullptr;  // [W]
  float head_bias = 0.f;
};

// Whether occupancy_decoder can run these sizes on this CPU, and pays off:
// AVX-512; width, head size and hidden width (at least the width) multiples of
// 16; and weights that stay in a core's L2 cache (kOccupancyDecoderMaxWeights),
// since every block of points reads them all again. Wider decoders (the real
// Cube models' 768) run faster through BLAS, which blocks its products for the
// cache.
constexpr int64_t kOccupancyDecoderMaxWeights = int64_t(1) << 18;  // float32 values, 1 MB
bool occupancy_decoder_supported(int64_t width, int64_t heads, int64_t hidden, int64_t latent_count,
                                 int64_t num_freqs);

// logits[p] for `count` points (xyz rows); keys/values [latent_count, W]. Only
// where occupancy_decoder_supported() says yes (checked: anything else stops).
void occupancy_decoder(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                       int64_t latent_count, const float* points, int64_t count, float* logits);
void occupancy_decoder_avx512(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                              int64_t latent_count, const float* points, int64_t count, float* logits);

// On a grid every point's coordinates come from three axis lists, and every
// value of the decoder's first layer depends on one coordinate only:
//   query_in(embed(x, y, z)) = bias + T_x[i] + T_y[j] + T_z[k],
// T_a[v] being the products of axis a's embedding values at axis[v] with their
// rows of query_in. occupancy_axis_terms writes T ([3, n, W], the bias folded
// into T_x) for an axis of n coordinates shared by x, y and z;
// occupancy_decoder_grid then takes grid indices ijk ([count, 3]) instead of
// points and skips the embedding and the first product: about a tenth of a
// point's arithmetic and all of its sines and cosines. The sums are ordered
// differently, so logits differ from occupancy_decoder's by float32 rounding.
void occupancy_axis_terms(const OccupancyDecoderWeights& weights, const float* axis, int64_t n, float* terms);
void occupancy_decoder_grid(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                            int64_t latent_count, const float* axis_terms, int64_t axis_points, const int32_t* ijk,
                            int64_t count, float* logits);
void occupancy_decoder_grid_avx512(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                                   int64_t latent_count, const float* axis_terms, int64_t axis_points,
                                   const int32_t* ijk, int64_t count, float* logits);

// The instruction set these kernels use on this CPU ("avx512" or "scalar").
const char* isa();

// The implementations behind the dispatch, callable directly for tests. The
// vector ones are defined in shape_kernels_avx512.cpp and need AVX-512F/DQ.
void fourier_embed_scalar(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out);
void fourier_embed_avx512(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out);
void layer_norm_scalar(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias,
                       float* y);
void layer_norm_avx512(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias,
                       float* y);
void softmax_rows_scalar(float* scores, int64_t rows, int64_t n, float scale);
void gelu_erf_scalar(float* x, int64_t n);
void silu_scalar(float* x, int64_t n);
void softmax_rows_avx512(float* scores, int64_t rows, int64_t n, float scale);
void gelu_erf_avx512(float* x, int64_t n);
void silu_avx512(float* x, int64_t n);

}  // namespace cubeforge::shape_kernels
