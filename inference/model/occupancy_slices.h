// The shape tokenizer's occupancy decoder over many points, as meshing asks
// for it: the points split into one slice per thread of the pool.
#pragma once

#include <cstdint>
#include <span>

#include "inference/core/result.h"
#include "inference/model/shape_tokenizer.h"

namespace cubeforge {

// Occupancy logits for many points, as meshing asks for them: one slice per
// thread, each with its products on that thread (cpu::sgemm does not split a
// product inside a pool thread). At small widths (the built-in model's 64)
// splitting every thin product instead cost most of the time.
Status occupancy_in_slices(const ShapeTokenizer& shape, const PreparedLatents& prepared,
                           std::span<const float> points, std::span<float> logits);
// The same at grid points named by their axis indices (ShapeTokenizer::occupancy_on_grid),
// with latent subsets and attention mass sliced along (LatentAttention).
Status occupancy_on_grid_in_slices(const ShapeTokenizer& shape, const PreparedLatents& prepared,
                                   const ShapeTokenizer::GridQueries& grid, std::span<const int32_t> ijk,
                                   std::span<float> logits, const LatentAttention& attention = {});

}  // namespace cubeforge
