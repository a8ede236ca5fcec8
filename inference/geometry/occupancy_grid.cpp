// Dense and coarse-to-fine evaluation of a field on the meshing grid: both
// hand lists of grid point indices to one evaluator, in batches.
//
// Coarse-to-fine keeps, per level, one byte per cell (visited / surface) and
// one byte per fine grid point (evaluated). At level l a cell spans
// 2^(R-l) fine points per axis; its corners are fine grid points, so every
// value ever evaluated is the value the dense grid would hold at that point.
// Its steps are in coarse_to_fine.h; evaluate_grid_field_coarse_to_fine below
// runs them level by level.
#include "inference/geometry/occupancy_grid.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "inference/geometry/coarse_to_fine.h"

namespace cubeforge {

std::vector<float> grid_axis_coordinates(const GridSpec& spec) {
  // np.linspace computes in float64 (start, stop and num promote to double):
  // y = arange(num) * (delta / div) + start, then y[-1] = stop, then the cast.
  const int64_t count = spec.points_per_axis();
  const double start = double(spec.lower);
  const double stop = double(spec.upper);
  const double step = (stop - start) / double(count - 1);
  std::vector<float> coordinates(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) coordinates[size_t(i)] = float(double(i) * step + start);
  coordinates[size_t(count - 1)] = float(stop);
  return coordinates;
}

std::vector<float> grid_points(const GridSpec& spec) {
  const std::vector<float> axis = grid_axis_coordinates(spec);
  const int64_t n = spec.points_per_axis();
  std::vector<float> points(size_t(spec.point_count()) * 3);
  size_t p = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) {
        points[p++] = axis[size_t(i)];
        points[p++] = axis[size_t(j)];
        points[p++] = axis[size_t(k)];
      }
  return points;
}

namespace {

Status check_spec(const GridSpec& spec) {
  if (spec.resolution < 1 || spec.resolution > 10) {
    return make_error(ErrorCode::kInvalidArgument, "grid resolution " + std::to_string(spec.resolution) +
                                                       " is out of range; use 1..10 (2^r cells per axis)");
  }
  if (!(spec.upper > spec.lower)) {
    return make_error(ErrorCode::kInvalidArgument, "grid bounds [" + std::to_string(spec.lower) + ", " +
                                                       std::to_string(spec.upper) + "] are empty");
  }
  return ok_status();
}

// Feeds grid point indices to the field in chunks and scatters the values back.
class GridFieldEvaluator {
 public:
  GridFieldEvaluator(const GridFieldFunction& field, const GridSpec& spec, const FieldEvaluationOptions& options,
                     std::vector<float>& values)
      : field_(field),
        spec_(spec),
        options_(options),
        values_(values),
        chunk_(size_t(std::max<int64_t>(1, options.chunk_points))) {}

  void plan(int64_t points) { planned_ += points; }
  int64_t evaluated() const { return evaluated_; }

  Status evaluate(std::span<const int64_t> indices) {
    const int64_t n = spec_.points_per_axis();
    for (size_t start = 0; start < indices.size(); start += chunk_) {
      const size_t count = std::min(chunk_, indices.size() - start);
      ijk_.resize(count * 3);
      batch_values_.assign(count, 0.f);
      for (size_t p = 0; p < count; ++p) {
        const int64_t index = indices[start + p];
        ijk_[p * 3 + 0] = int32_t(index / (n * n));
        ijk_[p * 3 + 1] = int32_t((index / n) % n);
        ijk_[p * 3 + 2] = int32_t(index % n);
      }
      Status status = field_(std::span<const int32_t>(ijk_), std::span<float>(batch_values_));
      if (!status.ok()) {
        Error error = status.take_error();
        error.message = "evaluating the field on the grid (resolution " + std::to_string(spec_.resolution) +
                        "): " + error.message;
        return error;
      }
      for (size_t p = 0; p < count; ++p) {
        const float value = batch_values_[p];
        if (!std::isfinite(value)) {
          const std::vector<float> axis = grid_axis_coordinates(spec_);
          return make_error(ErrorCode::kInternal,
                            "the field returned " + std::to_string(value) + " at (" +
                                std::to_string(axis[size_t(ijk_[p * 3])]) + ", " +
                                std::to_string(axis[size_t(ijk_[p * 3 + 1])]) + ", " +
                                std::to_string(axis[size_t(ijk_[p * 3 + 2])]) +
                                "); the decoder's weights or inputs are not finite");
        }
        values_[size_t(indices[start + p])] = value;
      }
      evaluated_ += int64_t(count);
      if (options_.progress && !options_.progress(evaluated_, std::max(planned_, evaluated_))) {
        return make_error(ErrorCode::kCancelled, "grid evaluation cancelled");
      }
    }
    return ok_status();
  }

 private:
  const GridFieldFunction& field_;
  const GridSpec& spec_;
  const FieldEvaluationOptions& options_;
  std::vector<float>& values_;
  size_t chunk_;
  std::vector<int32_t> ijk_;
  std::vector<float> batch_values_;
  int64_t evaluated_ = 0;
  int64_t planned_ = 0;
};

}  // namespace

GridFieldFunction field_on_grid(FieldFunction field, const GridSpec& spec) {
  return [field = std::move(field), axis = grid_axis_coordinates(spec)](std::span<const int32_t> ijk,
                                                                        std::span<float> values) -> Status {
    std::vector<float> points(ijk.size());
    for (size_t p = 0; p < ijk.size(); ++p) points[p] = axis[size_t(ijk[p])];
    return field(points, values);
  };
}

Result<ScalarGrid> evaluate_field_dense(const FieldFunction& field, const GridSpec& spec,
                                        const FieldEvaluationOptions& options) {
  CUBEFORGE_TRY(check_spec(spec));
  return evaluate_grid_field_dense(field_on_grid(field, spec), spec, options);
}

Result<CoarseToFineGrid> evaluate_field_coarse_to_fine(const FieldFunction& field, const GridSpec& spec,
                                                       const CoarseToFineOptions& options) {
  CUBEFORGE_TRY(check_spec(spec));
  return evaluate_grid_field_coarse_to_fine(field_on_grid(field, spec), spec, options);
}

Result<ScalarGrid> evaluate_grid_field_dense(const GridFieldFunction& field, const GridSpec& spec,
                                             const FieldEvaluationOptions& options) {
  CUBEFORGE_TRY(check_spec(spec));
  ScalarGrid grid;
  grid.spec = spec;
  grid.values.assign(size_t(spec.point_count()), 0.f);
  GridFieldEvaluator evaluator(field, spec, options, grid.values);
  evaluator.plan(spec.point_count());
  // Indices in chunks so the index list never costs more than a chunk.
  const int64_t chunk = std::max<int64_t>(1, options.chunk_points);
  std::vector<int64_t> indices;
  for (int64_t start = 0; start < spec.point_count(); start += chunk) {
    const int64_t end = std::min(spec.point_count(), start + chunk);
    indices.resize(size_t(end - start));
    for (int64_t p = start; p < end; ++p) indices[size_t(p - start)] = p;
    CUBEFORGE_TRY(evaluator.evaluate(indices));
  }
  return grid;
}

Result<CoarseToFineGrid> evaluate_grid_field_coarse_to_fine(const GridFieldFunction& field, const GridSpec& spec,
                                                            const CoarseToFineOptions& options) {
  CUBEFORGE_TRY(check_spec(spec));
  if (!(options.near_surface_margin >= 0.f) || !(options.final_near_surface_margin >= 0.f) || options.dilation < 0) {
    return make_error(ErrorCode::kInvalidArgument, "coarse-to-fine margin and dilation must not be negative");
  }
  const int target = spec.resolution;
  const int coarse = std::clamp(options.coarse_resolution, 1, target);
  const float surface_value = options.level;

  CoarseToFineGrid result;
  result.grid.spec = spec;
  std::vector<float>& values = result.grid.values;
  std::vector<uint8_t>& evaluated = result.evaluated;
  values.assign(size_t(spec.point_count()), 0.f);
  evaluated.assign(size_t(spec.point_count()), 0);
  result.stats.dense_points = spec.point_count();

  GridFieldEvaluator evaluator(field, spec, options.evaluation, values);
  std::vector<int64_t> points;  // fine indices to evaluate next
  auto evaluate_points = [&]() -> Status {
    evaluator.plan(int64_t(points.size()));
    return evaluator.evaluate(points);
  };

  std::vector<uint8_t> parent_surface;  // [(M/2)^3] the previous level's surface cells
  for (int level = coarse; level <= target; ++level) {
    const LevelCells cells = LevelCells::at(spec, level);
    const int64_t evaluated_before = evaluator.evaluated();
    if (options.begin_level) options.begin_level(level);
    LevelState state(cells);
    if (level == coarse) {  // every point, then every cell
      take_level_points(cells, evaluated, points);
      CUBEFORGE_TRY(evaluate_points());
      seed_every_cell(state);
    } else {
      fill_from_parent(cells, evaluated, values);
      seed_children(parent_surface, options.dilation, state);
    }
    // Grow along the surface from the seeds; when that runs dry, look around
    // for crossings it did not reach and grow from those.
    for (;;) {
      while (!state.queue.empty()) {
        take_unevaluated_corners(state, evaluated, points);
        CUBEFORGE_TRY(evaluate_points());
        grow_along_surface(state, values, surface_value);
      }
      look_around(state, values, surface_value);
      if (state.queue.empty()) break;
    }
    // Cells near the surface matter only for refining further: at the last
    // level marching cubes needs just the crossings, with true corners.
    std::optional<double> near_surface_margin;
    if (level < target) {
      near_surface_margin =
          double(level + 1 == target ? options.final_near_surface_margin : options.near_surface_margin);
    }
    std::vector<uint8_t> surface(size_t(cells.count()), 0);
    CoarseToFineLevel stats;
    stats.resolution = level;
    stats.surface_cells = mark_surface_cells(state, values, surface_value, near_surface_margin, surface);
    stats.evaluated_points = evaluator.evaluated() - evaluated_before;
    result.stats.levels.push_back(stats);
    parent_surface = std::move(surface);
  }
  result.stats.evaluated_points = evaluator.evaluated();
  return result;
}

int64_t count_sign_disagreements(const ScalarGrid& a, const ScalarGrid& b, float level) {
  CUBEFORGE_CHECK(a.values.size() == b.values.size(), "grids of different sizes");
  int64_t count = 0;
  for (size_t p = 0; p < a.values.size(); ++p) count += (a.values[p] > level) != (b.values[p] > level);
  return count;
}

}  // namespace cubeforge
