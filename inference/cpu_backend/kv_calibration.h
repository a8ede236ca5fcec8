// Low-rank key and value bases from calibration generations: the file that
// `--kv-rank` reads (LowRankKv, inference/model/kv_bases.h).
//
// Per layer, the keys (and separately the values) cached over the
// calibration generations are stacked into one matrix [rows, width]; its
// right singular vectors, by decreasing singular value, are the basis. They
// are computed as the eigenvectors of the Gram matrix Σ rowᵀ·row (width ×
// width, accumulated in double), so rows from any number of generations add
// up without being kept. The first R vectors are the rank-R subspace that
// keeps the most of the rows' squared norm (Eckart–Young).
#pragma once

#include <filesystem>
#include <span>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/result.h"
#include "inference/cpu_backend/gpt_session.h"
#include "inference/model/config.h"

namespace cubeforge {

// One layer's bases: orthonormal rows, by decreasing singular value.
struct KvLayerBasis {
  std::vector<float> keys, values;                 // [rank, width] each
  std::vector<double> key_spectrum, value_spectrum;  // [width]: every squared singular value, decreasing
};

// The fraction of the rows' squared norm that the first `rank` vectors keep.
double energy_kept(std::span<const double> spectrum, int rank);

class KvCalibration {
 public:
  explicit KvCalibration(const GptConfig& config);

  // Adds every row the session's cache holds, of every layer and batch row.
  Status add(const GptSession& session);
  // Adds rows [count, width] of layer `layer` directly.
  void add_rows(int layer, std::span<const float> keys, std::span<const float> values);
  int64_t rows() const { return rows_; }  // rows added to the first layer

  // The first `rank` singular vectors of every layer (1 <= rank <= width).
  Result<std::vector<KvLayerBasis>> bases(int rank) const;

 private:
  GptConfig config_;
  int layers_ = 0;
  int64_t width_ = 0, rows_ = 0;
  std::vector<std::vector<double>> key_gram_, value_gram_;  // per layer [width, width]
};

// Writes bases as LowRankKv reads them: layers.L.keys and layers.L.values,
// F32 [rank, width].
Status write_kv_bases(const std::filesystem::path& file, std::span<const KvLayerBasis> bases, int64_t width,
                      const WriteOptions& options = {});

// Eigenvalues and eigenvectors of the symmetric matrix `a` [n, n] (cyclic
// Jacobi rotations, in double): the eigenvalues by decreasing value, the
// eigenvectors as the matching rows of `vectors` [n, n].
void symmetric_eigen(std::vector<double> a, int64_t n, std::vector<double>* values, std::vector<double>* vectors);

}  // namespace cubeforge
