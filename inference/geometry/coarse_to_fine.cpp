// The steps of coarse-to-fine evaluation on the CPU: byte flags per cell,
// lists of cell indices, and the thread pool for the steps that sweep many
// cells (filling, looking around, marking).
#include "inference/geometry/coarse_to_fine.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "inference/core/thread_pool.h"

namespace cubeforge {

namespace {

// Steps over fewer cells than this run on the calling thread.
constexpr int64_t kParallelCells = 4096;

// Calls body(neighbour) for the unvisited cells among the 26 around `cell`.
template <class Body>
void for_each_unvisited_neighbour(const LevelState& level, int64_t cell, Body&& body) {
  const LevelCells& cells = level.cells;
  const int64_t m = cells.cells_per_axis;
  int64_t ci, cj, ck;
  cells.cell_coords(cell, ci, cj, ck);
  for (int64_t di = -1; di <= 1; ++di)
    for (int64_t dj = -1; dj <= 1; ++dj)
      for (int64_t dk = -1; dk <= 1; ++dk) {
        const int64_t ni = ci + di, nj = cj + dj, nk = ck + dk;
        if (ni < 0 || nj < 0 || nk < 0 || ni >= m || nj >= m || nk >= m) continue;
        const int64_t neighbour = cells.cell_index(ni, nj, nk);
        if (!level.cell_state[size_t(neighbour)]) body(neighbour);
      }
}

void visit(LevelState& level, int64_t cell, std::vector<int64_t>& queue) {
  level.cell_state[size_t(cell)] = kCellVisited;
  queue.push_back(cell);
  level.visited_cells.push_back(cell);
}

}  // namespace

LevelCells LevelCells::at(const GridSpec& spec, int level) {
  LevelCells cells;
  cells.cells_per_axis = int64_t(1) << level;
  cells.stride = int64_t(1) << (spec.resolution - level);
  cells.fine_points_per_axis = spec.points_per_axis();
  cells.cell_size = spec.cell_size() * double(cells.stride);
  return cells;
}

LevelState::LevelState(const LevelCells& level_cells)
    : cells(level_cells),
      cell_state(size_t(level_cells.count()), kCellUnvisited),
      checked_in_round(size_t(level_cells.count()), 0),
      parts(std::max<int64_t>(1, 4 * int64_t(ThreadPool::global().size()))),
      found_per_part(size_t(parts)) {}

bool cell_crosses_surface(const LevelCells& cells, std::span<const float> values, int64_t cell, float surface_value) {
  int64_t corner[8];
  cells.corners(cell, corner);
  bool any_inside = false, any_outside = false;
  for (int c = 0; c < 8; ++c) {
    if (values[size_t(corner[c])] > surface_value)
      any_inside = true;
    else
      any_outside = true;
  }
  return any_inside && any_outside;
}

bool cell_near_surface(const LevelCells& cells, std::span<const float> values, int64_t cell, float surface_value,
                       double margin) {
  int64_t ci, cj, ck;
  cells.cell_coords(cell, ci, cj, ck);
  const int64_t n = cells.fine_points_per_axis;
  const int64_t s = cells.stride;
  const int64_t step[3] = {s * n * n, s * n, s};
  const double half_diagonal = cells.cell_size * std::sqrt(3.0) * 0.5;
  float nearest = INFINITY, steepest = 0.f;
  for (int c = 0; c < 8; ++c) {
    const int64_t p[3] = {(ci + (c & 1)) * s, (cj + ((c >> 1) & 1)) * s, (ck + ((c >> 2) & 1)) * s};
    const int64_t index = (p[0] * n + p[1]) * n + p[2];
    const float v = values[size_t(index)];
    nearest = std::min(nearest, std::fabs(v - surface_value));
    for (int axis = 0; axis < 3; ++axis) {
      if (p[axis] + s < n) steepest = std::max(steepest, std::fabs(values[size_t(index + step[axis])] - v));
      if (p[axis] - s >= 0) steepest = std::max(steepest, std::fabs(values[size_t(index - step[axis])] - v));
    }
  }
  return double(nearest) <= margin * (double(steepest) / cells.cell_size) * half_diagonal;
}

void take_level_points(const LevelCells& cells, std::span<uint8_t> evaluated, std::vector<int64_t>& points) {
  const int64_t n = cells.fine_points_per_axis;
  const int64_t s = cells.stride;
  points.clear();
  for (int64_t i = 0; i < n; i += s)
    for (int64_t j = 0; j < n; j += s)
      for (int64_t k = 0; k < n; k += s) {
        const int64_t index = (i * n + j) * n + k;
        evaluated[size_t(index)] = 1;
        points.push_back(index);
      }
}

void fill_from_parent(const LevelCells& cells, std::span<const uint8_t> evaluated, std::span<float> values) {
  const int64_t s = cells.stride;
  const int64_t m = cells.cells_per_axis;
  const int64_t n = cells.fine_points_per_axis;
  parallel_for_each(m + 1, true, [&](int64_t i) {
    // Per row (i, j): the four parent rows' sums at each parent-level k,
    // then each point's value from the two sums around it.
    std::vector<double> parent_sums(size_t(m / 2 + 1));
    const int64_t i_lo = (i & ~int64_t(1)) * s, i_hi = (i & 1) ? i_lo + 2 * s : i_lo;
    for (int64_t j = 0; j <= m; ++j) {
      const int64_t j_lo = (j & ~int64_t(1)) * s, j_hi = (j & 1) ? j_lo + 2 * s : j_lo;
      const float* rows[4] = {&values[size_t((i_lo * n + j_lo) * n)], &values[size_t((i_hi * n + j_lo) * n)],
                              &values[size_t((i_lo * n + j_hi) * n)], &values[size_t((i_hi * n + j_hi) * n)]};
      for (int64_t p = 0; p <= m / 2; ++p) {
        const int64_t k = 2 * p * s;
        parent_sums[size_t(p)] = double(rows[0][k]) + double(rows[1][k]) + double(rows[2][k]) + double(rows[3][k]);
      }
      const int64_t row = (i * s * n + j * s) * n;
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

void seed_every_cell(LevelState& level) {
  std::fill(level.cell_state.begin(), level.cell_state.end(), kCellVisited);
  level.queue.resize(size_t(level.cells.count()));
  for (int64_t cell = 0; cell < level.cells.count(); ++cell) level.queue[size_t(cell)] = cell;
  level.visited_cells = level.queue;
}

void seed_children(std::span<const uint8_t> parent_surface, int64_t dilation, LevelState& level) {
  const int64_t m = level.cells.cells_per_axis;
  const int64_t pm = m / 2;
  for (int64_t parent = 0; parent < pm * pm * pm; ++parent) {
    if (!parent_surface[size_t(parent)]) continue;
    const int64_t pi = parent / (pm * pm), pj = (parent / pm) % pm, pk = parent % pm;
    // The children span [2p, 2p + 1] per axis; widen that by the dilation.
    const int64_t lo[3] = {std::max<int64_t>(0, 2 * pi - dilation), std::max<int64_t>(0, 2 * pj - dilation),
                           std::max<int64_t>(0, 2 * pk - dilation)};
    const int64_t hi[3] = {std::min(m - 1, 2 * pi + 1 + dilation), std::min(m - 1, 2 * pj + 1 + dilation),
                           std::min(m - 1, 2 * pk + 1 + dilation)};
    for (int64_t i = lo[0]; i <= hi[0]; ++i)
      for (int64_t j = lo[1]; j <= hi[1]; ++j)
        for (int64_t k = lo[2]; k <= hi[2]; ++k) {
          const int64_t cell = level.cells.cell_index(i, j, k);
          if (level.cell_state[size_t(cell)]) continue;
          visit(level, cell, level.queue);
        }
  }
}

void take_unevaluated_corners(const LevelState& level, std::span<uint8_t> evaluated, std::vector<int64_t>& points) {
  points.clear();
  for (int64_t cell : level.queue) {
    int64_t corner[8];
    level.cells.corners(cell, corner);
    for (int c = 0; c < 8; ++c) {
      if (evaluated[size_t(corner[c])]) continue;
      evaluated[size_t(corner[c])] = 1;
      points.push_back(corner[c]);
    }
  }
}

void grow_along_surface(LevelState& level, std::span<const float> values, float surface_value) {
  // A queued cell's corners are all evaluated: whether it crosses is final.
  std::vector<int64_t> next;
  for (int64_t cell : level.queue)
    if (cell_crosses_surface(level.cells, values, cell, surface_value)) {
      level.cell_state[size_t(cell)] = kCellCrossing;
      for_each_unvisited_neighbour(level, cell, [&](int64_t neighbour) { visit(level, neighbour, next); });
    }
  level.queue.swap(next);
}

void look_around(LevelState& level, std::span<const float> values, float surface_value) {
  if (++level.look_round == 0) {  // the stamps wrapped: forget them all
    std::fill(level.checked_in_round.begin(), level.checked_in_round.end(), uint8_t(0));
    level.look_round = 1;
  }
  const int64_t parts = level.parts;
  const int64_t look_from = level.looked_up_to;
  const int64_t to_look = int64_t(level.visited_cells.size()) - look_from;
  level.looked_up_to = int64_t(level.visited_cells.size());
  const uint8_t round = level.look_round;
  // While the parts look, nothing is written but the stamps and each part's
  // own finds; the finds are merged after.
  parallel_for_each(parts, to_look > kParallelCells, [&](int64_t part) {
    std::vector<int64_t>& out = level.found_per_part[size_t(part)];
    out.clear();
    for (int64_t v = look_from + to_look * part / parts; v < look_from + to_look * (part + 1) / parts; ++v) {
      const int64_t cell = level.visited_cells[size_t(v)];
      // Only cells that do not cross can have unvisited crossing neighbours.
      if (level.cell_state[size_t(cell)] == kCellCrossing) continue;
      for_each_unvisited_neighbour(level, cell, [&](int64_t neighbour) {
        std::atomic_ref<uint8_t> stamp(level.checked_in_round[size_t(neighbour)]);
        if (stamp.load(std::memory_order_relaxed) == round) return;
        stamp.store(round, std::memory_order_relaxed);
        if (cell_crosses_surface(level.cells, values, neighbour, surface_value)) out.push_back(neighbour);
      });
    }
  });
  for (const std::vector<int64_t>& cells_found : level.found_per_part)
    for (int64_t cell : cells_found) {
      if (level.cell_state[size_t(cell)]) continue;  // found by two parts
      visit(level, cell, level.queue);
    }
}

int64_t mark_surface_cells(const LevelState& level, std::span<const float> values, float surface_value,
                           std::optional<double> near_surface_margin, std::span<uint8_t> surface) {
  const int64_t parts = level.parts;
  std::vector<int64_t> counts(static_cast<size_t>(parts), 0);
  const int64_t visited_count = int64_t(level.visited_cells.size());
  parallel_for_each(parts, visited_count > kParallelCells, [&](int64_t part) {
    for (int64_t v = visited_count * part / parts; v < visited_count * (part + 1) / parts; ++v) {
      const int64_t cell = level.visited_cells[size_t(v)];
      if (level.cell_state[size_t(cell)] == kCellCrossing ||
          (near_surface_margin && cell_near_surface(level.cells, values, cell, surface_value, *near_surface_margin))) {
        surface[size_t(cell)] = 1;
        ++counts[size_t(part)];
      }
    }
  });
  int64_t count = 0;
  for (int64_t part_count : counts) count += part_count;
  return count;
}

}  // namespace cubeforge
