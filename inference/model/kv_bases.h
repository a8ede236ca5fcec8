// A model folder's low-rank bases for keys and values (kv_bases.safetensors,
// written by `cubeforge-lab calibrate-kv`): the same file for every backend
// that runs `--kv-rank` (options: engine_options.h, KvCacheOptions).
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "inference/core/result.h"
#include "inference/cpu/ops.h"
#include "inference/model/config.h"

namespace cubeforge {

// Per-layer bases for low-rank keys and values at one rank, ready for decode.
class LowRankKv {
 public:
  // Reads `file` (kv_bases.safetensors: layers.L.keys and layers.L.values,
  // each [R_max, width] float32 with orthonormal rows) and keeps the first
  // `rank` rows of each.
  static Result<std::shared_ptr<const LowRankKv>> load(const std::filesystem::path& file, const GptConfig& config,
                                                       int rank);

  int rank() const { return rank_; }
  int max_rank() const { return max_rank_; }

  struct Layer {
    cpu::WeightMatrix keys, values;                      // [R, width]: compress a row
    std::vector<cpu::WeightMatrix> key_heads;            // per head [R, D]: a query head into the latent
    std::vector<cpu::WeightMatrix> value_heads;          // per head [D, R]: a latent back to a head
  };
  const Layer& layer(size_t index) const { return layers_[index]; }

 private:
  int rank_ = 0, max_rank_ = 0;
  std::vector<std::vector<float>> storage_;
  std::vector<Layer> layers_;
};

}  // namespace cubeforge
