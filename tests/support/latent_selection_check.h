// Coarse-to-fine occupancy with latent selection against full attention on
// the same latents, as meshing runs it: the grid points the two classify
// differently (evaluated or filled), for the latent selection tests of the
// fixture and of the built-in model.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

#include "inference/geometry/occupancy_grid.h"
#include "inference/model/latent_selection.h"
#include "inference/model/occupancy_slices.h"

namespace cubeforge::testing {

struct LatentSelectionCheck {
  int64_t sign_disagreements = 0;   // grid points inside for one and outside for the other
  double largest_difference = 0.0;  // over every grid point
  int64_t evaluated_points = 0;     // with selection
  int64_t full_attention_evaluated_points = 0;
  LatentSelectionField::Stats selection;
};

inline Result<LatentSelectionCheck> compare_latent_selection(const ShapeTokenizer& shape,
                                                             std::span<const float> latents, int resolution,
                                                             int coarse_resolution, int64_t top_k) {
  CUBEFORGE_ASSIGN_OR_RETURN(PreparedLatents prepared, shape.prepare_latents(latents));
  GridSpec spec;
  spec.resolution = resolution;
  const ShapeTokenizer::GridQueries grid = shape.prepare_grid(grid_axis_coordinates(spec));
  CoarseToFineOptions options;
  options.coarse_resolution = coarse_resolution;
  options.evaluation.chunk_points = 8192;  // as generation evaluates
  const GridFieldFunction full_attention = [&](std::span<const int32_t> ijk, std::span<float> values) {
    return occupancy_on_grid_in_slices(shape, prepared, grid, ijk, values);
  };
  CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid full, evaluate_grid_field_coarse_to_fine(full_attention, spec, options));
  CUBEFORGE_ASSIGN_OR_RETURN(LatentSelectionField selection,
                             LatentSelectionField::create(shape, prepared, grid, spec, top_k));
  const GridFieldFunction selective = selection.attach(options);
  CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid selected, evaluate_grid_field_coarse_to_fine(selective, spec, options));
  LatentSelectionCheck check;
  check.sign_disagreements = count_sign_disagreements(full.grid, selected.grid, options.level);
  for (size_t p = 0; p < full.grid.values.size(); ++p)
    check.largest_difference =
        std::max(check.largest_difference, double(std::abs(full.grid.values[p] - selected.grid.values[p])));
  check.evaluated_points = selected.stats.evaluated_points;
  check.full_attention_evaluated_points = full.stats.evaluated_points;
  check.selection = selection.stats();
  return check;
}

}  // namespace cubeforge::testing
