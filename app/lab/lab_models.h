// What the lab's shape-tokenizer benchmarks measure (bench-occupancy,
// bench-shape-tokenizer): a model folder's shape tokenizer, or random weights
// of a preset's sizes (--shape), and the arithmetic one occupancy query costs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "inference/core/untrusted_text.h"
#include "inference/model/config.h"
#include "inference/model/random_weights.h"
#include "inference/model/shape_tokenizer.h"

namespace cubeforge::cli {

// The shape tokenizer of `folder` (its config.yaml when there is one).
inline Result<ShapeTokenizer> load_folder_shape_tokenizer(const std::filesystem::path& folder) {
  std::optional<ModelConfig> yaml;
  if (std::filesystem::exists(folder / "config.yaml")) {
    CUBEFORGE_ASSIGN_OR_RETURN(yaml, parse_model_config_yaml(folder / "config.yaml"));
  }
  return ShapeTokenizer::load(folder / "shape_tokenizer.safetensors", yaml ? &yaml->shape : nullptr,
                              yaml ? (folder / "config.yaml").string() : "");
}

// What a report calls a random-weight shape tokenizer, or a folder's.
inline std::string random_shape_tokenizer_name(const std::string& shape, uint64_t seed) {
  return "random " + shape + " shape tokenizer (seed " + std::to_string(seed) + ")";
}

// Multiply-adds per query point of the occupancy decoder (2 FLOPs each) with
// `attended` latents per point. By grid index the first layer (query_in)
// comes from per-axis terms: not counted.
inline double occupancy_flops_per_point(const ShapeModelConfig& c, bool by_grid_index, int64_t attended) {
  const double W = double(c.width), S = double(attended), E = double(c.fourier_dim()), hidden = 4.0 * W;
  const double macs = (by_grid_index ? 0.0 : E * W) + W * W  // query_in, query_out
                      + W * W                                // c_q
                      + 2.0 * S * W                          // scores and weighted values over all heads
                      + W * W                                // c_proj
                      + 2.0 * W * hidden                     // up, down
                      + W;                                   // head
  return 2.0 * macs;
}

}  // namespace cubeforge::cli
