// Occupancy values on the meshing grid, evaluated densely or coarse-to-fine.
//
// The shape decoder answers "how far inside is this point" (a logit: surface at
// 0, inside positive) for any batch of points, and every point costs a
// cross-attention over all latents. The meshing grid has (2^r + 1)^3 points over
// [-1.05, 1.05]^3, laid out x-major exactly like the reference's
// generate_dense_grid_points (np.linspace in float32, "ij" meshgrid), so a grid
// we evaluate lines up point for point with the reference's.
//
// Coarse-to-fine evaluation spends the decoder only near the surface: it
// evaluates a coarse grid, keeps the cells the surface can pass through
// (corners of both signs, or values close enough to zero that a surface could
// hide inside given how fast the field changes around the cell), grows that set along the
// surface and by a safety margin, and subdivides only those cells. Points it
// never evaluates are filled by trilinear interpolation from the enclosing
// coarser cell, whose corners all have one sign, so they take that sign and
// marching cubes sees the same surface as on the dense grid.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge {

// Values of a scalar field at a batch of points: points_xyz is [N, 3], values
// is [N]. The caller decides the batch size (see chunk_points).
using FieldFunction = std::function<Status(std::span<const float> points_xyz, std::span<float> values)>;

// The same at grid points named by their axis indices: ijk is [N, 3] (i along
// x, j along y, k along z). A field that reuses work along grid lines (the
// shape decoder's first layer is a sum of one term per axis) takes this form.
using GridFieldFunction = std::function<Status(std::span<const int32_t> ijk, std::span<float> values)>;

// Called after each evaluated batch with the points done so far and the
// points planned so far (the plan grows while coarse-to-fine refines).
// Returning false cancels: the evaluation ends with ErrorCode::kCancelled.
using FieldProgress = std::function<bool(int64_t evaluated_points, int64_t planned_points)>;

struct GridSpec {
  int resolution = 8;  // 2^resolution cells per axis
  double lower = -1.05;  // double, as the reference's np.linspace takes its bounds
  double upper = 1.05;

  int64_t cells_per_axis() const { return int64_t(1) << resolution; }
  int64_t points_per_axis() const { return cells_per_axis() + 1; }
  int64_t point_count() const { return points_per_axis() * points_per_axis() * points_per_axis(); }
  // x-major ("ij"): x is the slowest index, z the fastest.
  int64_t point_index(int64_t i, int64_t j, int64_t k) const {
    return (i * points_per_axis() + j) * points_per_axis() + k;
  }
  double cell_size() const { return (double(upper) - double(lower)) / double(cells_per_axis()); }
};

// The coordinates along one axis: np.linspace(lower, upper, 2^r + 1,
// dtype=np.float32), i.e. computed in double as i * step + lower, the last one
// set to upper, then rounded to float.
std::vector<float> grid_axis_coordinates(const GridSpec& spec);

// `field` asked at the points of the grid `spec` describes.
GridFieldFunction field_on_grid(FieldFunction field, const GridSpec& spec);

// All grid points as [point_count, 3] in x-major order.
std::vector<float> grid_points(const GridSpec& spec);

// A full grid of field values, x-major.
struct ScalarGrid {
  GridSpec spec;
  std::vector<float> values;  // [points_per_axis^3]

  float at(int64_t i, int64_t j, int64_t k) const { return values[size_t(spec.point_index(i, j, k))]; }
};

struct FieldEvaluationOptions {
  int64_t chunk_points = 65536;  // points per call of the field function
  FieldProgress progress;        // optional
};

Result<ScalarGrid> evaluate_field_dense(const FieldFunction& field, const GridSpec& spec,
                                        const FieldEvaluationOptions& options = {});
Result<ScalarGrid> evaluate_grid_field_dense(const GridFieldFunction& field, const GridSpec& spec,
                                             const FieldEvaluationOptions& options = {});

struct CoarseToFineOptions {
  // The first level, evaluated densely. Clamped to the target resolution.
  // Features thinner than a cell of this level whose field is saturated away
  // from them can be missed; lower it only for smooth fields.
  int coarse_resolution = 5;
  // Safety margin: at each finer level, the cells within this many cells
  // (Chebyshev distance) of the children of the coarser level's surface cells
  // are evaluated too. Cells the surface is found to cross always get their
  // 26 neighbours evaluated as well, which already follows every surface the
  // coarser level found; the near-surface margins below catch the ones it did
  // not.
  int dilation = 0;
  // A cell whose corner values are all one sign is still refined when its
  // smallest |value| is at most margin * slope * (cell diagonal / 2), slope
  // being the largest |value difference| / spacing along the cell's edges and
  // the edges leaving its corners: with a field that changes no faster than
  // that nearby, margin 1 is exactly "a zero could lie in this cell". A local
  // slope keeps saturated regions of a logit field (flat far from the surface)
  // from being refined.
  //
  // Cells of the levels below the last span four or more target cells per
  // axis, and over that distance a saturated field's slope can hide a thin
  // part: they take twice the bound. The last level's cells span two target
  // cells, where the local slope is a fair bound: they take it as it is. With
  // no dilation that evaluates fewer points than margin 2 at every level with
  // dilation 1, and finds the same surfaces (cubeforge-lab bench-meshing).
  float near_surface_margin = 2.0f;
  float final_near_surface_margin = 1.0f;
  float level = 0.0f;  // the surface value
  FieldEvaluationOptions evaluation;
  // Optional: called at the start of every level, coarse first, with its
  // resolution, before the field is asked for any of its points. A field
  // that works level by level (the shape decoder choosing latents for each
  // cell of the level before) learns here which level they belong to.
  std::function<void(int resolution)> begin_level;
};

struct CoarseToFineLevel {
  int resolution = 0;
  int64_t evaluated_points = 0;  // new points evaluated at this level
  int64_t surface_cells = 0;     // cells kept for refinement (before dilation)
};

struct CoarseToFineStats {
  int64_t evaluated_points = 0;  // field evaluations in total
  int64_t dense_points = 0;      // what dense evaluation would cost
  std::vector<CoarseToFineLevel> levels;
};

struct CoarseToFineGrid {
  ScalarGrid grid;                // every point has a value: evaluated or filled
  std::vector<uint8_t> evaluated;  // [point_count] 1 where the field was evaluated
  CoarseToFineStats stats;
};

Result<CoarseToFineGrid> evaluate_field_coarse_to_fine(const FieldFunction& field, const GridSpec& spec,
                                                       const CoarseToFineOptions& options = {});
Result<CoarseToFineGrid> evaluate_grid_field_coarse_to_fine(const GridFieldFunction& field, const GridSpec& spec,
                                                            const CoarseToFineOptions& options = {});

// Points whose inside/outside class (value > level) differs between two grids
// of the same spec.
int64_t count_sign_disagreements(const ScalarGrid& a, const ScalarGrid& b, float level = 0.f);

}  // namespace cubeforge
