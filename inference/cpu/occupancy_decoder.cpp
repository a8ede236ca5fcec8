// The fused occupancy decoder's size check, its entry points (through the
// kernel table) and the per-axis first-layer terms of grid queries.
#include "inference/cpu/occupancy_decoder.h"

#include <vector>

#include "inference/core/result.h"
#include "inference/cpu/kernels.h"
#include "inference/cpu/ops.h"

namespace cubeforge::cpu {

bool occupancy_decoder_supported(int64_t width, int64_t heads, int64_t hidden, int64_t latent_count,
                                 int64_t num_freqs) {
  if (!kernels().occupancy_decoder || width <= 0 || heads <= 0 || width % heads != 0 || num_freqs <= 0) return false;
  const int64_t weights = 3 * (2 * num_freqs + 1) * width + 3 * width * width + 2 * width * hidden + width;
  return width % 16 == 0 && hidden % 16 == 0 && hidden >= width && latent_count > 0 &&
         weights <= kOccupancyDecoderMaxWeights;
}

void occupancy_decoder(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                       int64_t latent_count, const float* points, int64_t count, float* logits,
                       const LatentAttention& attention) {
  if (count <= 0) return;
  CUBEFORGE_CHECK(occupancy_decoder_supported(weights.width, weights.heads, weights.hidden, latent_count,
                                              weights.num_freqs),
                  "the fused occupancy decoder was called where occupancy_decoder_supported() says no");
  CUBEFORGE_CHECK(attention.per_group <= latent_count, "a point attends to more latents than there are");
  kernels().occupancy_decoder(weights, keys, values, latent_count, points, count, logits, attention);
}

void occupancy_axis_terms(const OccupancyDecoderWeights& w, const float* axis, int64_t n, float* terms) {
  const int64_t F = w.num_freqs, E = 3 * (2 * F + 1), W = w.width;
  std::vector<float> points(static_cast<size_t>(n * 3)), embedded(static_cast<size_t>(n * E));
  for (int64_t v = 0; v < n; ++v) points[size_t(v * 3)] = points[size_t(v * 3 + 1)] = points[size_t(v * 3 + 2)] = axis[v];
  fourier_embed(w.fourier_weight, w.carrier, F, points.data(), n, embedded.data());
  for (int a = 0; a < 3; ++a) {
    // Axis a's embedding values: its coordinate, then its F cosine and F sine terms.
    std::vector<int64_t> rows = {a};
    for (int64_t f = 0; f < F; ++f) rows.push_back(3 + a * F + f);
    for (int64_t f = 0; f < F; ++f) rows.push_back(3 + 3 * F + a * F + f);
    for (int64_t v = 0; v < n; ++v) {
      float* out = terms + (a * n + v) * W;
      for (int64_t j = 0; j < W; ++j) out[j] = (a == 0 && w.query_in_bias) ? w.query_in_bias[j] : 0.f;
      for (int64_t e : rows) {
        const float value = embedded[size_t(v * E + e)];
        const float* weight_row = w.query_in + e * W;
        for (int64_t j = 0; j < W; ++j) out[j] += value * weight_row[j];
      }
    }
  }
}

void occupancy_decoder_grid(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                            int64_t latent_count, const float* axis_terms, int64_t axis_points, const int32_t* ijk,
                            int64_t count, float* logits, const LatentAttention& attention) {
  if (count <= 0) return;
  CUBEFORGE_CHECK(occupancy_decoder_supported(weights.width, weights.heads, weights.hidden, latent_count,
                                              weights.num_freqs),
                  "the fused occupancy decoder was called where occupancy_decoder_supported() says no");
  CUBEFORGE_CHECK(attention.per_group <= latent_count, "a point attends to more latents than there are");
  kernels().occupancy_decoder_grid(weights, keys, values, latent_count, axis_terms, axis_points, ijk, count, logits,
                                   attention);
}

}  // namespace cubeforge::cpu
