// Low-rank key and value bases from calibration generations (see
// kv_calibration.h).
#include "inference/cpu_backend/kv_calibration.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "inference/tensor/safetensors.h"

namespace cubeforge {

KvCalibration::KvCalibration(const GptConfig& config)
    : config_(config), layers_(config.dual_layers + config.single_layers), width_(config.width) {
  key_gram_.assign(size_t(layers_), std::vector<double>(size_t(width_ * width_), 0.0));
  value_gram_ = key_gram_;
}

namespace {

// gram += Σ rowᵀ·row over rows [count, n]; the upper triangle only.
void accumulate_gram(std::span<const float> rows, int64_t n, std::vector<double>& gram) {
  const int64_t count = int64_t(rows.size()) / n;
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t c = 0; c < n; ++c) row[size_t(c)] = rows[size_t(r * n + c)];
    for (int64_t i = 0; i < n; ++i) {
      const double ri = row[size_t(i)];
      double* g = gram.data() + i * n;
      for (int64_t j = i; j < n; ++j) g[j] += ri * row[size_t(j)];
    }
  }
}

}  // namespace

void KvCalibration::add_rows(int layer, std::span<const float> keys, std::span<const float> values) {
  accumulate_gram(keys, width_, key_gram_[size_t(layer)]);
  accumulate_gram(values, width_, value_gram_[size_t(layer)]);
  if (layer == 0) rows_ += int64_t(keys.size()) / width_;
}

Status KvCalibration::add(const GptSession& session) {
  std::vector<float> keys, values;
  for (int layer = 0; layer < layers_; ++layer)
    for (int row = 0; row < session.batch(); ++row) {
      CUBEFORGE_TRY(session.read_cache(layer, row, &keys, &values));
      add_rows(layer, keys, values);
    }
  return ok_status();
}

void symmetric_eigen(std::vector<double> a, int64_t n, std::vector<double>* values, std::vector<double>* vectors) {
  // v accumulates the rotations: a = v·diag·vᵀ with eigenvectors as v's columns.
  std::vector<double> v(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.0;
  auto at = [&](int64_t i, int64_t j) -> double& { return a[size_t(i * n + j)]; };
  double total = 0;
  for (double x : a) total += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) off += at(i, j) * at(i, j);
    if (off <= 1e-24 * total) break;  // off-diagonal norm 1e-12 of the whole: far below float
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = at(p, q);
        if (apq == 0) continue;
        // The rotation that zeroes a[p][q] (Numerical Recipes' stable form).
        const double theta = (at(q, q) - at(p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const double akp = at(k, p), akq = at(k, q);
          at(k, p) = c * akp - s * akq;
          at(k, q) = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const double apk = at(p, k), aqk = at(q, k);
          at(p, k) = c * apk - s * aqk;
          at(q, k) = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double vkp = v[size_t(k * n + p)], vkq = v[size_t(k * n + q)];
          v[size_t(k * n + p)] = c * vkp - s * vkq;
          v[size_t(k * n + q)] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return at(x, x) > at(y, y); });
  values->resize(size_t(n));
  vectors->resize(size_t(n * n));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t column = order[size_t(r)];
    (*values)[size_t(r)] = at(column, column);
    for (int64_t k = 0; k < n; ++k) (*vectors)[size_t(r * n + k)] = v[size_t(k * n + column)];
  }
}

namespace {

// The first `rank` eigenvectors of the Gram matrix (upper triangle filled),
// as float rows, and every eigenvalue.
void leading_vectors(const std::vector<double>& upper, int64_t n, int rank, std::vector<float>* rows,
                     std::vector<double>* spectrum) {
  std::vector<double> gram = upper;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) gram[size_t(i * n + j)] = gram[size_t(j * n + i)];
  std::vector<double> vectors;
  symmetric_eigen(std::move(gram), n, spectrum, &vectors);
  rows->resize(size_t(rank * n));
  for (int64_t i = 0; i < rank * n; ++i) (*rows)[size_t(i)] = float(vectors[size_t(i)]);
}

}  // namespace

double energy_kept(std::span<const double> spectrum, int rank) {
  double total = 0, kept = 0;
  for (size_t i = 0; i < spectrum.size(); ++i) {
    total += std::max(0.0, spectrum[i]);
    if (int(i) < rank) kept += std::max(0.0, spectrum[i]);
  }
  return total > 0 ? kept / total : 1.0;
}

Result<std::vector<KvLayerBasis>> KvCalibration::bases(int rank) const {
  if (rank < 1 || rank > width_)
    return make_error(ErrorCode::kInvalidArgument, "a KV basis rank of " + std::to_string(rank) +
                                                       " is outside 1.." + std::to_string(width_) + " (the width)");
  if (rows_ == 0) return make_error(ErrorCode::kInvalidArgument, "no cached keys and values to calibrate on");
  std::vector<KvLayerBasis> bases(static_cast<size_t>(layers_));
  for (int l = 0; l < layers_; ++l) {
    KvLayerBasis& basis = bases[size_t(l)];
    leading_vectors(key_gram_[size_t(l)], width_, rank, &basis.keys, &basis.key_spectrum);
    leading_vectors(value_gram_[size_t(l)], width_, rank, &basis.values, &basis.value_spectrum);
  }
  return bases;
}

Status write_kv_bases(const std::filesystem::path& file, std::span<const KvLayerBasis> bases, int64_t width,
                      const WriteOptions& options) {
  std::vector<TensorToWrite> tensors;
  for (size_t l = 0; l < bases.size(); ++l)
    for (const auto* kind : {"keys", "values"}) {
      const std::vector<float>& rows = kind[0] == 'k' ? bases[l].keys : bases[l].values;
      tensors.push_back({"layers." + std::to_string(l) + "." + kind, DType::kF32,
                         {int64_t(rows.size()) / width, width}, std::as_bytes(std::span(rows))});
    }
  return write_safetensors(file, tensors, {{"cubeforge.kind", "kv_bases"}}, options);
}

}  // namespace cubeforge
