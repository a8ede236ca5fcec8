// Run-time choice between the AVX-512 and scalar shape kernels.
#include "inference/model/shape_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "inference/core/result.h"
#include "inference/core/thread_pool.h"
#include "inference/cpu/ops.h"

namespace cubeforge::shape_kernels {

namespace {

bool has_avx512() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return supported;
}

}  // namespace

void fourier_embed_scalar(const float* weight, const float* carrier, int64_t num_freqs, const float* points,
                          int64_t count, float* out) {
  const int64_t F = num_freqs;
  const int64_t dim = 3 * (2 * F + 1);
  const float pi = std::numbers::pi_v<float>;
  parallel_for_each(count, count * F > 4096, [&](int64_t p) {
    const float* xyz = points + p * 3;
    float* row = out + p * dim;
    float* cosines = row + 3;
    float* sines = row + 3 + 3 * F;
    for (int i = 0; i < 3; ++i) {
      row[i] = xyz[i];
      const float phase = xyz[i] * 0.5f * pi;  // (p·0.5)·π in float32, the reference's order
      for (int64_t f = 0; f < F; ++f) {
        const float modulated = xyz[i] * weight[i * F + f];
        const float carried = phase + carrier[f];
        cosines[i * F + f] = std::cos(modulated) + std::cos(carried);
        sines[i * F + f] = std::sin(modulated) + std::sin(carried);
      }
    }
  });
}

void layer_norm_scalar(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias,
                       float* y) {
  cpu::layer_norm(x, rows, n, eps, weight, bias, y);
}

void softmax_rows_scalar(float* scores, int64_t rows, int64_t n, float scale) {
  parallel_for_each(rows, rows * n > 16384, [&](int64_t r) {
    float* row = scores + r * n;
    float max_value = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) max_value = std::max(max_value, row[j] * scale);
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] * scale - max_value);
      sum += row[j];
    }
    const float inverse = 1.f / sum;
    for (int64_t j = 0; j < n; ++j) row[j] *= inverse;
  });
}

void gelu_erf_scalar(float* x, int64_t n) {
  // 1 + erf(y) = erfc(-y): no cancellation for negative x.
  parallel_for_each(n, n > 65536, [&](int64_t i) { x[i] = 0.5f * x[i] * std::erfc(-x[i] * 0.70710678118654752f); });
}

void silu_scalar(float* x, int64_t n) {
  parallel_for_each(n, n > 65536, [&](int64_t i) { x[i] = x[i] / (1.0f + std::exp(-x[i])); });
}

void fourier_embed(const float* weight, const float* carrier, int64_t num_freqs, const float* points, int64_t count,
                   float* out) {
  if (count <= 0) return;
  if (has_avx512())
    fourier_embed_avx512(weight, carrier, num_freqs, points, count, out);
  else
    fourier_embed_scalar(weight, carrier, num_freqs, points, count, out);
}

void layer_norm(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias, float* y) {
  if (rows <= 0 || n <= 0) return;
  if (has_avx512())
    layer_norm_avx512(x, rows, n, eps, weight, bias, y);
  else
    layer_norm_scalar(x, rows, n, eps, weight, bias, y);
}

void softmax_rows(float* scores, int64_t rows, int64_t n, float scale) {
  if (rows <= 0 || n <= 0) return;
  if (has_avx512())
    softmax_rows_avx512(scores, rows, n, scale);
  else
    softmax_rows_scalar(scores, rows, n, scale);
}

void gelu_erf(float* x, int64_t n) {
  if (n <= 0) return;
  if (has_avx512())
    gelu_erf_avx512(x, n);
  else
    gelu_erf_scalar(x, n);
}

void silu(float* x, int64_t n) {
  if (n <= 0) return;
  if (has_avx512())
    silu_avx512(x, n);
  else
    silu_scalar(x, n);
}

bool occupancy_decoder_supported(int64_t width, int64_t heads, int64_t hidden, int64_t latent_count,
                                 int64_t num_freqs) {
  if (!has_avx512() || width <= 0 || heads <= 0 || width % heads != 0 || num_freqs <= 0) return false;
  const int64_t head_dim = width / heads;
  const int64_t weights = 3 * (2 * num_freqs + 1) * width + 3 * width * width + 2 * width * hidden + width;
  return width % 16 == 0 && head_dim % 16 == 0 && hidden % 16 == 0 && hidden >= width && latent_count > 0 &&
         weights <= kOccupancyDecoderMaxWeights;
}

void occupancy_decoder(const OccupancyDecoderWeights& weights, const float* keys, const float* values,
                       int64_t latent_count, const float* points, int64_t count, float* logits) {
  if (count <= 0) return;
  CUBEFORGE_CHECK(occupancy_decoder_supported(weights.width, weights.heads, weights.hidden, latent_count,
                                              weights.num_freqs),
                  "the fused occupancy decoder was called where occupancy_decoder_supported() says no");
  occupancy_decoder_avx512(weights, keys, values, latent_count, points, count, logits);
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
                            int64_t count, float* logits) {
  if (count <= 0) return;
  CUBEFORGE_CHECK(occupancy_decoder_supported(weights.width, weights.heads, weights.hidden, latent_count,
                                              weights.num_freqs),
                  "the fused occupancy decoder was called where occupancy_decoder_supported() says no");
  occupancy_decoder_grid_avx512(weights, keys, values, latent_count, axis_terms, axis_points, ijk, count, logits);
}

const char* isa() { return has_avx512() ? "avx512" : "scalar"; }

}  // namespace cubeforge::shape_kernels
