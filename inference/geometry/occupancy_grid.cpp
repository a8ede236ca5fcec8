// Dense and coarse-to-fine evaluation of a field on the meshing grid.
//
// Coarse-to-fine keeps, per level, one byte per cell (visited / surface) and
// one byte per fine grid point (evaluated). At level l a cell spans
// 2^(R-l) fine points per axis; its corners are fine grid points, so every
// value ever evaluated is the value the dense grid would hold at that point.
#include "inference/geometry/occupancy_grid.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "inference/core/thread_pool.h"

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

// Cells of one level: m per axis, each spanning `stride` fine points.
struct LevelCells {
  int64_t m = 0;
  int64_t stride = 0;
  int64_t fine_n = 0;  // fine points per axis

  int64_t count() const { return m * m * m; }
  int64_t cell_index(int64_t ci, int64_t cj, int64_t ck) const { return (ci * m + cj) * m + ck; }
  void cell_coords(int64_t cell, int64_t& ci, int64_t& cj, int64_t& ck) const {
    ci = cell / (m * m);
    cj = (cell / m) % m;
    ck = cell % m;
  }
  // The 8 corner fine indices, corner c = (c&1, c>>1&1, c>>2&1) in (x, y, z).
  void corners(int64_t cell, int64_t out[8]) const {
    int64_t ci, cj, ck;
    cell_coords(cell, ci, cj, ck);
    for (int c = 0; c < 8; ++c) {
      const int64_t i = (ci + (c & 1)) * stride;
      const int64_t j = (cj + ((c >> 1) & 1)) * stride;
      const int64_t k = (ck + ((c >> 2) & 1)) * stride;
      out[c] = (i * fine_n + j) * fine_n + k;
    }
  }
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
  const int64_t fine_n = spec.points_per_axis();
  const float level_value = options.level;

  CoarseToFineGrid result;
  result.grid.spec = spec;
  std::vector<float>& values = result.grid.values;
  std::vector<uint8_t>& evaluated = result.evaluated;
  values.assign(size_t(spec.point_count()), 0.f);
  evaluated.assign(size_t(spec.point_count()), 0);
  result.stats.dense_points = spec.point_count();

  GridFieldEvaluator evaluator(field, spec, options.evaluation, values);
  std::vector<int64_t> pending;  // fine indices to evaluate

  // Level `coarse`: every point.
  {
    const int64_t stride = int64_t(1) << (target - coarse);
    for (int64_t i = 0; i < fine_n; i += stride)
      for (int64_t j = 0; j < fine_n; j += stride)
        for (int64_t k = 0; k < fine_n; k += stride) {
          const int64_t index = (i * fine_n + j) * fine_n + k;
          evaluated[size_t(index)] = 1;
          pending.push_back(index);
        }
    evaluator.plan(int64_t(pending.size()));
    CUBEFORGE_TRY(evaluator.evaluate(pending));
  }
  const int64_t coarse_points = evaluator.evaluated();

  std::vector<uint8_t> seeds_from_parent;  // surface cells of the previous level
  for (int level = coarse; level <= target; ++level) {
    LevelCells cells;
    cells.m = int64_t(1) << level;
    cells.stride = int64_t(1) << (target - level);
    cells.fine_n = fine_n;
    const int64_t evaluated_before = evaluator.evaluated();
    const double spacing = spec.cell_size() * double(cells.stride);
    const double half_diagonal = spacing * std::sqrt(3.0) * 0.5;
    const double margin =
        double(level + 1 == target ? options.final_near_surface_margin : options.near_surface_margin);

    if (level > coarse) {
      // Points new at this level that no refinement reaches take the
      // trilinear value of their parent cell: the parent's corners all have
      // one sign there, so the filled value has it too.
      const int64_t s = cells.stride;
      const int64_t m = cells.m;
      parallel_for_each(m + 1, true, [&](int64_t i) {
        // Per row (i, j): the four parent rows' sums at each parent-level k,
        // then each point's value from the two sums around it.
        std::vector<double> parent_sums(size_t(m / 2 + 1));
        const int64_t i_lo = (i & ~int64_t(1)) * s, i_hi = (i & 1) ? i_lo + 2 * s : i_lo;
        for (int64_t j = 0; j <= m; ++j) {
          const int64_t j_lo = (j & ~int64_t(1)) * s, j_hi = (j & 1) ? j_lo + 2 * s : j_lo;
          const float* rows[4] = {&values[size_t((i_lo * fine_n + j_lo) * fine_n)],
                                  &values[size_t((i_hi * fine_n + j_lo) * fine_n)],
                                  &values[size_t((i_lo * fine_n + j_hi) * fine_n)],
                                  &values[size_t((i_hi * fine_n + j_hi) * fine_n)]};
          for (int64_t p = 0; p <= m / 2; ++p) {
            const int64_t k = 2 * p * s;
            parent_sums[size_t(p)] = double(rows[0][k]) + double(rows[1][k]) + double(rows[2][k]) + double(rows[3][k]);
          }
          const int64_t row = (i * s * fine_n + j * s) * fine_n;
          const int64_t k_step = ((i | j) & 1) ? 1 : 2;  // in a parent-level row only odd k are new
          for (int64_t k = k_step - 1; k <= m; k += k_step) {
            const int64_t index = row + k * s;
            if (evaluated[size_t(index)]) continue;
            const double sum = parent_sums[size_t(k / 2)] + parent_sums[size_t((k + 1) / 2)];
            values[size_t(index)] = float(sum / 8.0);
          }
        }
      });
    }

    auto crosses_surface = [&](int64_t cell) {
      int64_t corner[8];
      cells.corners(cell, corner);
      bool any_inside = false, any_outside = false;
      for (int c = 0; c < 8; ++c) {
        if (values[size_t(corner[c])] > level_value) any_inside = true; else any_outside = true;
      }
      return any_inside && any_outside;
    };
    // Corners of one sign, but close enough to the surface value that a thin
    // part could lie between them: the smallest |value| is within reach of the
    // steepest change seen along the cell's edges and the edges leaving its
    // corners (so a cell centred on a thin plate still sees the slope beside
    // it). Only meaningful for cells whose corners were evaluated.
    auto near_surface = [&](int64_t cell) {
      int64_t ci, cj, ck;
      cells.cell_coords(cell, ci, cj, ck);
      const int64_t s = cells.stride;
      const int64_t step[3] = {s * fine_n * fine_n, s * fine_n, s};
      float nearest = INFINITY, steepest = 0.f;
      for (int c = 0; c < 8; ++c) {
        const int64_t p[3] = {(ci + (c & 1)) * s, (cj + ((c >> 1) & 1)) * s, (ck + ((c >> 2) & 1)) * s};
        const int64_t index = (p[0] * fine_n + p[1]) * fine_n + p[2];
        const float v = values[size_t(index)];
        nearest = std::min(nearest, std::fabs(v - level_value));
        for (int axis = 0; axis < 3; ++axis) {
          if (p[axis] + s < fine_n) steepest = std::max(steepest, std::fabs(values[size_t(index + step[axis])] - v));
          if (p[axis] - s >= 0) steepest = std::max(steepest, std::fabs(values[size_t(index - step[axis])] - v));
        }
      }
      return double(nearest) <= margin * (double(steepest) / spacing) * half_diagonal;
    };

    // Per cell: not visited yet, visited, or visited and crossed by the surface.
    constexpr uint8_t kVisited = 1, kCrossing = 2;
    std::vector<uint8_t> visited(size_t(cells.count()), 0);
    std::vector<int64_t> queue;
    if (level == coarse) {
      // Every coarse point is evaluated: look at every cell.
      std::fill(visited.begin(), visited.end(), kVisited);
      queue.resize(size_t(cells.count()));
      for (int64_t cell = 0; cell < cells.count(); ++cell) queue[size_t(cell)] = cell;
    } else {
      // The children of the previous level's surface cells, widened by the
      // safety margin at this level.
      const int64_t pm = cells.m / 2;
      const int64_t radius = options.dilation;
      for (int64_t parent = 0; parent < pm * pm * pm; ++parent) {
        if (!seeds_from_parent[size_t(parent)]) continue;
        const int64_t pi = parent / (pm * pm), pj = (parent / pm) % pm, pk = parent % pm;
        // The children span [2p, 2p + 1] per axis; widen that by the radius.
        const int64_t lo[3] = {std::max<int64_t>(0, 2 * pi - radius), std::max<int64_t>(0, 2 * pj - radius),
                               std::max<int64_t>(0, 2 * pk - radius)};
        const int64_t hi[3] = {std::min(cells.m - 1, 2 * pi + 1 + radius), std::min(cells.m - 1, 2 * pj + 1 + radius),
                               std::min(cells.m - 1, 2 * pk + 1 + radius)};
        for (int64_t i = lo[0]; i <= hi[0]; ++i)
          for (int64_t j = lo[1]; j <= hi[1]; ++j)
            for (int64_t k = lo[2]; k <= hi[2]; ++k) {
              const int64_t cell = cells.cell_index(i, j, k);
              if (visited[size_t(cell)]) continue;
              visited[size_t(cell)] = kVisited;
              queue.push_back(cell);
            }
      }
    }

    // Grow along the surface: evaluate the queued cells' corners, queue the
    // unvisited neighbours of those the surface turns out to cross. When that
    // runs dry, look around the visited region for cells with corners of both
    // signs that the growth did not reach (their corners may be partly filled
    // values). Nothing further out can have both: an unvisited cell lies in a
    // coarser cell that was no surface cell, so its filled corners and the
    // coarser cell's corners share one sign, and any other corner was
    // evaluated as the corner of a visited cell, which is then a neighbour.
    std::vector<int64_t> visited_cells = queue;
    // The unvisited cells among the 26 around `cell`.
    auto for_each_unvisited_neighbour = [&](int64_t cell, auto&& body) {
      int64_t ci, cj, ck;
      cells.cell_coords(cell, ci, cj, ck);
      for (int64_t di = -1; di <= 1; ++di)
        for (int64_t dj = -1; dj <= 1; ++dj)
          for (int64_t dk = -1; dk <= 1; ++dk) {
            const int64_t ni = ci + di, nj = cj + dj, nk = ck + dk;
            if (ni < 0 || nj < 0 || nk < 0 || ni >= cells.m || nj >= cells.m || nk >= cells.m) continue;
            const int64_t neighbour = cells.cell_index(ni, nj, nk);
            if (!visited[size_t(neighbour)]) body(neighbour);
          }
    };
    auto visit_neighbours = [&](int64_t cell, std::vector<int64_t>& out) {
      for_each_unvisited_neighbour(cell, [&](int64_t neighbour) {
        visited[size_t(neighbour)] = kVisited;
        out.push_back(neighbour);
        visited_cells.push_back(neighbour);
      });
    };
    std::vector<uint8_t> checked(size_t(cells.count()), 0);
    uint8_t look_round = 0;
    // The unvisited neighbours of `cell` that the surface crosses and that no
    // look of this round has checked yet. An unvisited cell borders several
    // visited ones; `checked` holds the round that last checked it. Two threads
    // may both check a cell (the flag is read and set without a lock); that
    // only repeats work, and the finds are merged without duplicates.
    auto crossing_unvisited_neighbours = [&](int64_t cell, std::vector<int64_t>& out) {
      for_each_unvisited_neighbour(cell, [&](int64_t neighbour) {
        std::atomic_ref<uint8_t> stamp(checked[size_t(neighbour)]);
        if (stamp.load(std::memory_order_relaxed) == look_round) return;
        stamp.store(look_round, std::memory_order_relaxed);
        if (crosses_surface(neighbour)) out.push_back(neighbour);
      });
    };
    const int64_t parts = std::max<int64_t>(1, 4 * int64_t(ThreadPool::global().size()));
    std::vector<std::vector<int64_t>> found(static_cast<size_t>(parts));
    int64_t looked_up_to = 0;  // visited_cells before this index have been looked around
    for (;;) {
      while (!queue.empty()) {
        pending.clear();
        for (int64_t cell : queue) {
          int64_t corner[8];
          cells.corners(cell, corner);
          for (int c = 0; c < 8; ++c) {
            if (evaluated[size_t(corner[c])]) continue;
            evaluated[size_t(corner[c])] = 1;
            pending.push_back(corner[c]);
          }
        }
        evaluator.plan(int64_t(pending.size()));
        CUBEFORGE_TRY(evaluator.evaluate(pending));

        // A processed cell's corners are all evaluated: whether it crosses
        // is final, and a crossing one has all its neighbours visited.
        std::vector<int64_t> next;
        for (int64_t cell : queue)
          if (crosses_surface(cell)) {
            visited[size_t(cell)] = kCrossing;
            visit_neighbours(cell, next);
          }
        queue.swap(next);
      }
      // Only cells that do not cross can have unvisited crossing neighbours.
      // Only cells visited since the last look need one: values change only
      // at the corners of cells visited since, and any cell with such a
      // corner is their neighbour. Nothing is written while the parts look,
      // so they look in parallel.
      if (++look_round == 0) {  // the stamps wrapped: forget them all
        std::fill(checked.begin(), checked.end(), uint8_t(0));
        look_round = 1;
      }
      const int64_t look_from = looked_up_to;
      const int64_t to_look = int64_t(visited_cells.size()) - look_from;
      looked_up_to = int64_t(visited_cells.size());
      parallel_for_each(parts, to_look > 4096, [&](int64_t part) {
        std::vector<int64_t>& out = found[size_t(part)];
        out.clear();
        for (int64_t v = look_from + to_look * part / parts; v < look_from + to_look * (part + 1) / parts; ++v) {
          const int64_t cell = visited_cells[size_t(v)];
          if (visited[size_t(cell)] != kCrossing) crossing_unvisited_neighbours(cell, out);
        }
      });
      for (const std::vector<int64_t>& cells_found : found)
        for (int64_t cell : cells_found) {
          if (visited[size_t(cell)]) continue;  // found by two cells
          visited[size_t(cell)] = kVisited;
          queue.push_back(cell);
          visited_cells.push_back(cell);
        }
      if (queue.empty()) break;
    }

    // Every crossing cell is visited now, so only visited cells need a look.
    // Cells near the surface matter only for refining further: at the last
    // level marching cubes needs just the crossings, with true corners.
    std::vector<uint8_t> surface(size_t(cells.count()), 0);
    std::vector<int64_t> surface_counts(static_cast<size_t>(parts), 0);
    const int64_t visited_count = int64_t(visited_cells.size());
    parallel_for_each(parts, visited_count > 4096, [&](int64_t part) {
      for (int64_t v = visited_count * part / parts; v < visited_count * (part + 1) / parts; ++v) {
        const int64_t cell = visited_cells[size_t(v)];
        if (visited[size_t(cell)] == kCrossing || (level < target && near_surface(cell))) {
          surface[size_t(cell)] = 1;
          ++surface_counts[size_t(part)];
        }
      }
    });
    int64_t surface_count = 0;
    for (int64_t count : surface_counts) surface_count += count;
    CoarseToFineLevel stats;
    stats.resolution = level;
    stats.evaluated_points = evaluator.evaluated() - evaluated_before;
    stats.surface_cells = surface_count;
    result.stats.levels.push_back(stats);
    if (level < target) seeds_from_parent = std::move(surface);
  }
  result.stats.levels.front().evaluated_points += coarse_points;
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
