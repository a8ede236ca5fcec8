// The shape tokenizer's occupancy decoder, fused into one kernel for small
// decoders: for each query point, Fourier embedding → query_in (SiLU) →
// query_out → one cross-attention layer over prepared latent keys/values
// (LN → c_q → softmax attention → c_proj, then LN → up → GELU → down, both
// residual) → ln_f → a single-logit head.
//
// Blocks of a few dozen points run every step in cache with register-blocked
// products, where the layer-at-a-time path sends thin matrices through BLAS,
// paying for packing, clearing and a hand-over between threads on every
// product. Its arithmetic is the vector-math ops' (ops.h): float32 lanes,
// polynomial exp, erfc, sin and cos. Only AVX-512 CPUs run it.
#pragma once

#include <cstdint>

namespace cubeforge::cpu {

// Linear weights are float32 stored transposed, [in, out]; biases may be null.
// W = width, F = Fourier frequencies.
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

// Cross-attention over some of the latents, and what it reports; both
// optional (the default attends to every latent and reports nothing).
//
// With per_group > 0, point p attends only to the per_group latents listed in
// row group[p] of `latents` (the softmax runs over them alone): the adaptive
// KV selection of FlashVDM, where a block of nearby points shares one row.
// Each point's keys and values are gathered once per run of points with the
// same row, then the same products run as over every latent, and a point's
// arithmetic does not depend on the points beside it: a row listing every
// latent in ascending order gives full attention's logits bit for bit.
//
// `mass` ([count, attended], attended = per_group or latent_count): each
// point's attention weights summed over the heads, over the latents it
// attended to, in the order they are listed.
struct LatentAttention {
  int64_t per_group = 0;
  const int32_t* latents = nullptr;  // [groups, per_group], indices into the keys and values
  const int32_t* group = nullptr;    // [count]
  float* mass = nullptr;
};

// Whether occupancy_decoder can run these sizes on this CPU, and pays off:
// AVX-512; width and hidden width (at least the width) multiples of 16, any
// head size (a head's products take masked tails, as width 96 over 4 heads
// needs); and weights that stay in a core's L2 cache (kOccupancyDecoderMaxWeights),
// since every block of points reads them all again. Wider decoders (the real
// Cube models' 768) run faster through BLAS, which blocks its products for the
// cache.
constexpr int64_t kOccupancyDecoderMaxWeights = int64_t(1) << 18;  // float32 values, 1 MB
bool occupancy_decoder_supported(int64_t width, int64_t heads, int64_t hidden, int64_t latent_count,
                                 int64_t num_freqs);

// logits[p] for `count` points (xyz rows); keys/values [latent_count, W]. Only
// where occupancy_decoder_supported() says yes (checked: anything else stops).
void occupancy_decoder(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                       int64_t latent_count, const float* points, int64_t count, float* logits,
                       const LatentAttention& attention = {});

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
                            int64_t count, float* logits, const LatentAttention& attention = {});

}  // namespace cubeforge::cpu
