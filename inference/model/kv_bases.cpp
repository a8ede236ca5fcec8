// Reading and checking a model folder's low-rank KV bases (kv_bases.h).
#include "inference/model/kv_bases.h"

#include <cmath>
#include <string>

#include "inference/tensor/safetensors.h"

namespace cubeforge {

Result<std::shared_ptr<const LowRankKv>> LowRankKv::load(const std::filesystem::path& path, const GptConfig& config,
                                                         int rank) {
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  const int64_t W = config.width, H = config.heads, D = config.head_dim();
  const int layers = config.dual_layers + config.single_layers;
  auto bases = std::make_shared<LowRankKv>();
  bases->rank_ = rank;
  for (int l = 0; l < layers; ++l) {
    Layer layer;
    for (const char* kind : {"keys", "values"}) {
      const std::string name = "layers." + std::to_string(l) + "." + kind;
      CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, file.get(name));
      if (view.dtype() != DType::kF32 || view.shape().size() != 2 || view.shape()[1] != W || view.shape()[0] < 1)
        return make_error(ErrorCode::kCorruptFile, "'" + file.name() + "': tensor '" + name + "' is " +
                                                       std::string(dtype_name(view.dtype())) + " " +
                                                       shape_to_string(view.shape()) + ", expected F32 [rank, " +
                                                       std::to_string(W) + "]; recalibrate for this model");
      const int max_rank = int(view.shape()[0]);
      if (l == 0 && kind[0] == 'k') bases->max_rank_ = max_rank;
      if (max_rank != bases->max_rank_)
        return make_error(ErrorCode::kCorruptFile, "'" + file.name() + "': tensor '" + name + "' has " +
                                                       std::to_string(max_rank) + " vectors, the first layer " +
                                                       std::to_string(bases->max_rank_));
      if (rank < 1 || rank > max_rank)
        return make_error(ErrorCode::kInvalidArgument, "a KV rank of " + std::to_string(rank) + " is outside the 1.." +
                                                           std::to_string(max_rank) + " that '" + file.name() +
                                                           "' holds; recalibrate with a larger rank");
      // Copied out: the file may place the tensor at any byte offset.
      CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> values, file.read_f32(name));
      const float* rows = values.data();
      for (int64_t i = 0; i < rank; ++i) {
        double norm = 0;
        for (int64_t c = 0; c < W; ++c) norm += double(rows[i * W + c]) * rows[i * W + c];
        if (!(std::fabs(norm - 1.0) < 1e-3))
          return make_error(ErrorCode::kCorruptFile, "'" + file.name() + "': vector " + std::to_string(i) + " of '" +
                                                         name + "' is not of unit length; recalibrate");
      }
      // Vectors keep their buffers when storage_ grows: take the pointer now.
      const float* whole = bases->storage_.emplace_back(rows, rows + rank * W).data();
      std::vector<cpu::WeightMatrix> heads;
      for (int64_t h = 0; h < H; ++h) {
        auto& block = bases->storage_.emplace_back(size_t(rank * D));
        const bool into_latent = kind[0] == 'k';
        for (int64_t i = 0; i < rank; ++i)
          for (int64_t d = 0; d < D; ++d)
            (into_latent ? block[size_t(i * D + d)] : block[size_t(d * rank + i)]) = rows[i * W + h * D + d];
        heads.push_back(into_latent ? cpu::WeightMatrix{DType::kF32, block.data(), rank, D}
                                    : cpu::WeightMatrix{DType::kF32, block.data(), D, rank});
      }
      const cpu::WeightMatrix compress{DType::kF32, whole, rank, W};
      if (kind[0] == 'k') {
        layer.keys = compress;
        layer.key_heads = std::move(heads);
      } else {
        layer.values = compress;
        layer.value_heads = std::move(heads);
      }
    }
    bases->layers_.push_back(std::move(layer));
  }
  return std::shared_ptr<const LowRankKv>(std::move(bases));
}

}  // namespace cubeforge
