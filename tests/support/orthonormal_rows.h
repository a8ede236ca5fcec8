// Rows of a random orthonormal basis, for tests of low-rank key and value
// compression that need directions with known projections.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace cubeforge::testing {

// [n, n] row-major, Gram–Schmidt in double over normal samples from `seed`.
inline std::vector<double> orthonormal_rows(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<double> rows(size_t(n * n));
  for (auto& v : rows) v = normal(gen);
  for (int i = 0; i < n; ++i) {
    double* r = rows.data() + i * n;
    for (int j = 0; j < i; ++j) {
      const double* q = rows.data() + j * n;
      double dot = 0;
      for (int c = 0; c < n; ++c) dot += r[c] * q[c];
      for (int c = 0; c < n; ++c) r[c] -= dot * q[c];
    }
    double norm = 0;
    for (int c = 0; c < n; ++c) norm += r[c] * r[c];
    for (int c = 0; c < n; ++c) r[c] /= std::sqrt(norm);
  }
  return rows;
}

}  // namespace cubeforge::testing
