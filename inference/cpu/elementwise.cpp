// The scalar loops of the vector-math ops (ops.h) that no exact op shares:
// what CPUs without AVX-512 run, and what the tests compare the AVX-512
// kernels with.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "inference/core/thread_pool.h"
#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

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

void silu_lanes_scalar(float* x, int64_t n) {
  parallel_for_each(n, n > 65536, [&](int64_t i) { x[i] = x[i] / (1.0f + std::exp(-x[i])); });
}

}  // namespace cubeforge::cpu
