// Run-time choice between the AVX-512 and scalar shape kernels.
#include "inference/model/shape_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

void softmax_rows_scalar(float* scores, int64_t rows, int64_t n, float scale) {
#pragma omp parallel for schedule(static) if (rows * n > 16384)
  for (int64_t r = 0; r < rows; ++r) {
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
  }
}

void gelu_erf_scalar(float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  // 1 + erf(y) = erfc(-y): no cancellation for negative x.
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * std::erfc(-x[i] * 0.70710678118654752f);
}

void silu_scalar(float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
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

const char* isa() { return has_avx512() ? "avx512" : "scalar"; }

}  // namespace cubeforge::shape_kernels
