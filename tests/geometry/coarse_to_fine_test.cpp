// The steps of coarse-to-fine evaluation one by one, each against the same
// thing computed directly from grid coordinates: trilinear interpolation,
// sub-cells, neighbourhoods and sign checks by brute force.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "inference/geometry/analytic_fields.h"
#include "inference/geometry/coarse_to_fine.h"

namespace cubeforge {
namespace {

struct Point {
  int64_t i, j, k;
};

// Fine index of a fine grid point and back.
int64_t fine_index(const GridSpec& spec, Point p) { return spec.point_index(p.i, p.j, p.k); }
Point fine_point(const GridSpec& spec, int64_t index) {
  const int64_t n = spec.points_per_axis();
  return {index / (n * n), (index / n) % n, index % n};
}

// Corner values of a cell read through explicit coordinates.
std::vector<float> corner_values(const GridSpec& spec, const LevelCells& cells, std::span<const float> values,
                                 int64_t cell) {
  int64_t ci, cj, ck;
  cells.cell_coords(cell, ci, cj, ck);
  std::vector<float> corners;
  for (int64_t di = 0; di <= 1; ++di)
    for (int64_t dj = 0; dj <= 1; ++dj)
      for (int64_t dk = 0; dk <= 1; ++dk)
        corners.push_back(values[size_t(fine_index(
            spec, {(ci + di) * cells.stride, (cj + dj) * cells.stride, (ck + dk) * cells.stride}))]);
  return corners;
}

bool has_both_signs(const std::vector<float>& corners, float surface_value) {
  const bool inside = std::any_of(corners.begin(), corners.end(), [&](float v) { return v > surface_value; });
  const bool outside = std::any_of(corners.begin(), corners.end(), [&](float v) { return !(v > surface_value); });
  return inside && outside;
}

int64_t chebyshev_distance(const LevelCells& cells, int64_t a, int64_t b) {
  int64_t ai, aj, ak, bi, bj, bk;
  cells.cell_coords(a, ai, aj, ak);
  cells.cell_coords(b, bi, bj, bk);
  return std::max({std::abs(ai - bi), std::abs(aj - bj), std::abs(ak - bk)});
}

void visit_by_hand(LevelState& level, int64_t cell, uint8_t state = kCellVisited) {
  level.cell_state[size_t(cell)] = state;
  level.visited_cells.push_back(cell);
}

std::vector<float> random_values(const GridSpec& spec, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<float> values(size_t(spec.point_count()));
  for (float& v : values) v = float(double(generator() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  return values;
}

TEST(CoarseToFineSteps, FillFromParentIsTrilinearOfTheParentCell) {
  GridSpec spec;
  spec.resolution = 4;
  const LevelCells cells = LevelCells::at(spec, 3);  // stride 2; the parent level has stride 4
  const int64_t parent_stride = 2 * cells.stride;
  const int64_t n = spec.points_per_axis();
  constexpr float kUntouched = 1000.f, kEvaluated = -777.f;

  std::vector<float> values = random_values(spec, 7);
  std::vector<uint8_t> evaluated(size_t(spec.point_count()), 0);
  auto on_level = [&](Point p, int64_t stride) { return p.i % stride == 0 && p.j % stride == 0 && p.k % stride == 0; };
  std::mt19937 pick(3);
  for (int64_t index = 0; index < spec.point_count(); ++index) {
    const Point p = fine_point(spec, index);
    if (on_level(p, parent_stride)) continue;  // the parent's values stay random
    values[size_t(index)] = kUntouched;
    if (on_level(p, cells.stride) && pick() % 5 == 0) {  // some new points are evaluated already
      evaluated[size_t(index)] = 1;
      values[size_t(index)] = kEvaluated;
    }
  }
  const std::vector<float> before = values;

  fill_from_parent(cells, evaluated, values);

  int64_t filled = 0;
  for (int64_t index = 0; index < spec.point_count(); ++index) {
    const Point p = fine_point(spec, index);
    if (!on_level(p, cells.stride) || on_level(p, parent_stride) || evaluated[size_t(index)]) {
      ASSERT_EQ(values[size_t(index)], before[size_t(index)]) << "point " << p.i << " " << p.j << " " << p.k;
      continue;
    }
    // Trilinear interpolation in the parent cell holding the point.
    const int64_t coords[3] = {p.i, p.j, p.k};
    int64_t low[3];
    double t[3];
    for (int a = 0; a < 3; ++a) {
      low[a] = std::min(coords[a] / parent_stride, (n - 1) / parent_stride - 1) * parent_stride;
      t[a] = double(coords[a] - low[a]) / double(parent_stride);
    }
    double expected = 0.0;
    for (int c = 0; c < 8; ++c) {
      const int64_t offset[3] = {c & 1, (c >> 1) & 1, (c >> 2) & 1};
      double weight = 1.0;
      for (int a = 0; a < 3; ++a) weight *= offset[a] ? t[a] : 1.0 - t[a];
      expected += weight * double(before[size_t(fine_index(spec, {low[0] + offset[0] * parent_stride,
                                                                  low[1] + offset[1] * parent_stride,
                                                                  low[2] + offset[2] * parent_stride}))]);
    }
    ASSERT_NEAR(values[size_t(index)], expected, 1e-6) << "point " << p.i << " " << p.j << " " << p.k;
    ++filled;
  }
  EXPECT_GT(filled, 400);  // of the 9^3 - 5^3 = 604 new points, about a fifth are evaluated
}

TEST(CoarseToFineSteps, SeededChildrenAreTheSubCellsOfSurfaceCells) {
  GridSpec spec;
  spec.resolution = 5;
  const LevelCells cells = LevelCells::at(spec, 3);  // 8 cells per axis, 4 per axis in the parent level
  const LevelCells parents = LevelCells::at(spec, 2);
  std::vector<uint8_t> parent_surface(size_t(parents.count()), 0);
  for (int64_t parent : {0, 5, 21, 63}) parent_surface[size_t(parent)] = 1;

  for (int64_t dilation : {0, 1}) {
    SCOPED_TRACE("dilation " + std::to_string(dilation));
    LevelState level(cells);
    seed_children(parent_surface, dilation, level);

    std::set<int64_t> expected;
    for (int64_t cell = 0; cell < cells.count(); ++cell) {
      int64_t ci, cj, ck;
      cells.cell_coords(cell, ci, cj, ck);
      for (int64_t parent = 0; parent < parents.count(); ++parent) {
        if (!parent_surface[size_t(parent)]) continue;
        int64_t pi, pj, pk;
        parents.cell_coords(parent, pi, pj, pk);
        // Chebyshev distance from the cell to the parent's 2x2x2 children.
        auto gap = [](int64_t c, int64_t p) { return std::max<int64_t>({0, 2 * p - c, c - (2 * p + 1)}); };
        if (std::max({gap(ci, pi), gap(cj, pj), gap(ck, pk)}) <= dilation) expected.insert(cell);
      }
    }
    if (dilation == 0) {
      EXPECT_EQ(expected.size(), 4u * 8u);
    }
    EXPECT_EQ(std::set<int64_t>(level.queue.begin(), level.queue.end()), expected);
    EXPECT_EQ(level.queue.size(), expected.size()) << "a cell was queued twice";
    EXPECT_EQ(level.visited_cells, level.queue);
    for (int64_t cell = 0; cell < cells.count(); ++cell)
      EXPECT_EQ(level.cell_state[size_t(cell)], expected.count(cell) ? kCellVisited : kCellUnvisited) << cell;
    // Parent order: the first flagged parent's children come first.
    for (size_t q = 0; q < 8 && dilation == 0; ++q) {
      int64_t ci, cj, ck;
      cells.cell_coords(level.queue[q], ci, cj, ck);
      EXPECT_EQ(parents.cell_index(ci / 2, cj / 2, ck / 2), 0);
    }
  }
}

TEST(CoarseToFineSteps, UnevaluatedCornersAreTakenOnce) {
  GridSpec spec;
  spec.resolution = 4;
  const LevelCells cells = LevelCells::at(spec, 3);
  LevelState level(cells);
  for (int64_t cell : {cells.cell_index(1, 1, 1), cells.cell_index(1, 1, 2), cells.cell_index(6, 0, 7)})
    level.queue.push_back(cell);
  std::vector<uint8_t> evaluated(size_t(spec.point_count()), 0);
  const int64_t already = fine_index(spec, {2, 2, 4});  // shared by the first two cells
  evaluated[size_t(already)] = 1;

  std::vector<int64_t> points = {123};  // replaced
  take_unevaluated_corners(level, evaluated, points);

  std::set<int64_t> expected;
  for (int64_t cell : level.queue) {
    int64_t ci, cj, ck;
    cells.cell_coords(cell, ci, cj, ck);
    for (int64_t d = 0; d < 8; ++d)
      expected.insert(fine_index(spec, {(ci + (d & 1)) * 2, (cj + ((d >> 1) & 1)) * 2, (ck + ((d >> 2) & 1)) * 2}));
  }
  expected.erase(already);
  EXPECT_EQ(std::set<int64_t>(points.begin(), points.end()), expected);
  EXPECT_EQ(points.size(), expected.size()) << "a corner was taken twice";
  for (int64_t index : expected) EXPECT_TRUE(evaluated[size_t(index)]);
  EXPECT_EQ(std::count(evaluated.begin(), evaluated.end(), 1), int64_t(expected.size()) + 1);
}

TEST(CoarseToFineSteps, GrowingMarksCrossingsAndQueuesTheirUnvisitedNeighbours) {
  GridSpec spec;
  spec.resolution = 4;
  auto dense = evaluate_field_dense(sphere_field(0.5f), spec);
  ASSERT_TRUE(dense.ok());
  const std::span<const float> values = dense->values;
  const LevelCells cells = LevelCells::at(spec, 4);
  LevelState level(cells);
  // A row of cells along x through the sphere's centre: some cross, some do not.
  for (int64_t ci = 0; ci < cells.cells_per_axis; ++ci) {
    const int64_t cell = cells.cell_index(ci, 8, 8);
    visit_by_hand(level, cell);
    level.queue.push_back(cell);
  }
  visit_by_hand(level, cells.cell_index(3, 9, 8));  // visited already: must not be queued again
  const std::vector<int64_t> queued = level.queue;
  const std::vector<uint8_t> state_before = level.cell_state;

  grow_along_surface(level, values, 0.f);

  std::set<int64_t> expected_queue;
  int64_t crossing = 0;
  for (int64_t cell : queued) {
    const bool crosses = has_both_signs(corner_values(spec, cells, values, cell), 0.f);
    EXPECT_EQ(level.cell_state[size_t(cell)], crosses ? kCellCrossing : kCellVisited) << cell;
    if (!crosses) continue;
    ++crossing;
    for (int64_t other = 0; other < cells.count(); ++other)
      if (!state_before[size_t(other)] && chebyshev_distance(cells, cell, other) == 1) expected_queue.insert(other);
  }
  EXPECT_GE(crossing, 2);  // where the row enters and leaves the sphere
  EXPECT_LT(crossing, int64_t(queued.size()));
  EXPECT_EQ(std::set<int64_t>(level.queue.begin(), level.queue.end()), expected_queue);
  EXPECT_EQ(level.queue.size(), expected_queue.size()) << "a cell was queued twice";
  for (int64_t cell : level.queue) EXPECT_EQ(level.cell_state[size_t(cell)], kCellVisited);
  ASSERT_EQ(level.visited_cells.size(), queued.size() + 1 + level.queue.size());
  EXPECT_TRUE(
      std::equal(level.queue.begin(), level.queue.end(), level.visited_cells.end() - ptrdiff_t(level.queue.size())));
}

TEST(CoarseToFineSteps, NearSurfaceSeesTheSlopeBesideTheCell) {
  GridSpec spec;
  spec.resolution = 3;
  const LevelCells cells = LevelCells::at(spec, 2);  // stride 2
  const int64_t cell = cells.cell_index(1, 1, 1);    // corners at points 2 and 4 per axis
  // Inside everywhere, 1 above the surface value: flat, so no surface nearby.
  std::vector<float> values(size_t(spec.point_count()), 1.f);
  EXPECT_FALSE(cell_near_surface(cells, values, cell, 0.f, 1.0));

  // A drop of 11 one cell beyond a corner, on either side: the slope 11 per
  // cell reaches zero within half a diagonal (sqrt(3) / 2 cells) of a corner
  // 1 above it; a margin of 0.1 shrinks that reach below 1.
  for (const Point beyond : {Point{0, 2, 2}, Point{6, 4, 4}, Point{4, 2, 6}}) {
    SCOPED_TRACE(std::to_string(beyond.i) + " " + std::to_string(beyond.j) + " " + std::to_string(beyond.k));
    std::vector<float> dropped = values;
    dropped[size_t(fine_index(spec, beyond))] = -10.f;
    EXPECT_TRUE(cell_near_surface(cells, dropped, cell, 0.f, 1.0));
    EXPECT_FALSE(cell_near_surface(cells, dropped, cell, 0.f, 0.1));
    EXPECT_FALSE(cell_crosses_surface(cells, dropped, cell, 0.f));
  }
  // Points between the level's points are not looked at.
  std::vector<float> between = values;
  between[size_t(fine_index(spec, {3, 2, 2}))] = -10.f;
  EXPECT_FALSE(cell_near_surface(cells, between, cell, 0.f, 1.0));
}

// What a look around must find: the unvisited crossing cells beside a
// visited cell that does not cross.
std::set<int64_t> crossings_beside_visited(const GridSpec& spec, const LevelState& level,
                                           std::span<const float> values) {
  const LevelCells& cells = level.cells;
  std::set<int64_t> expected;
  for (int64_t cell = 0; cell < cells.count(); ++cell) {
    if (level.cell_state[size_t(cell)] != kCellUnvisited) continue;
    if (!has_both_signs(corner_values(spec, cells, values, cell), 0.f)) continue;
    int64_t ci, cj, ck;
    cells.cell_coords(cell, ci, cj, ck);
    bool beside = false;
    for (int64_t di = -1; di <= 1; ++di)
      for (int64_t dj = -1; dj <= 1; ++dj)
        for (int64_t dk = -1; dk <= 1; ++dk) {
          const int64_t i = ci + di, j = cj + dj, k = ck + dk;
          const int64_t m = cells.cells_per_axis;
          if (i < 0 || j < 0 || k < 0 || i >= m || j >= m || k >= m) continue;
          if (level.cell_state[size_t(cells.cell_index(i, j, k))] == kCellVisited) beside = true;
        }
    if (beside) expected.insert(cell);
  }
  return expected;
}

TEST(CoarseToFineSteps, LookAroundFindsACrossingPlantedNextToAVisitedCell) {
  GridSpec spec;
  spec.resolution = 3;
  const LevelCells cells = LevelCells::at(spec, 3);  // stride 1: cell (i, j, k) spans points i..i+1
  std::vector<float> values(size_t(spec.point_count()), -1.f);
  LevelState level(cells);
  visit_by_hand(level, cells.cell_index(3, 3, 3));
  // Point (5, 3, 3) is a corner of cells 4..5 x 2..3 x 2..3, not of the
  // visited cell; the four with x = 4 border it.
  values[size_t(fine_index(spec, {5, 3, 3}))] = 1.f;
  // A crossing far from any visited cell stays unfound.
  values[size_t(fine_index(spec, {0, 8, 0}))] = 1.f;
  const LevelState before = level;

  look_around(level, values, 0.f);

  const std::set<int64_t> expected = {cells.cell_index(4, 2, 2), cells.cell_index(4, 2, 3), cells.cell_index(4, 3, 2),
                                      cells.cell_index(4, 3, 3)};
  EXPECT_EQ(crossings_beside_visited(spec, before, values), expected);
  EXPECT_EQ(std::set<int64_t>(level.queue.begin(), level.queue.end()), expected);
  EXPECT_EQ(level.queue.size(), expected.size());
  for (int64_t cell : expected) EXPECT_EQ(level.cell_state[size_t(cell)], kCellVisited);
  ASSERT_EQ(level.visited_cells.size(), 5u);
  EXPECT_EQ(level.looked_up_to, 1);  // the finds are looked around next time

  // A crossing cell's neighbours are all visited when it is marked, so it is
  // not looked around.
  LevelState crossing_only(cells);
  visit_by_hand(crossing_only, cells.cell_index(3, 3, 3), kCellCrossing);
  look_around(crossing_only, values, 0.f);
  EXPECT_TRUE(crossing_only.queue.empty());
}

TEST(CoarseToFineSteps, LookAroundMatchesABruteForceSearchInParallel) {
  GridSpec spec;
  spec.resolution = 5;
  const LevelCells cells = LevelCells::at(spec, 5);  // 32^3 cells: enough to look in parallel
  // Mostly outside, with scattered inside points, so crossings are sparse.
  std::vector<float> values = random_values(spec, 11);
  for (float& v : values) v = v > 0.9f ? 1.f : -1.f;
  LevelState level(cells);
  std::mt19937 pick(5);
  for (int64_t cell = 0; cell < cells.count(); ++cell)
    if (pick() % 3 == 0) visit_by_hand(level, cell, pick() % 4 == 0 ? kCellCrossing : kCellVisited);
  ASSERT_GT(int64_t(level.visited_cells.size()), 4096);
  const std::set<int64_t> expected = crossings_beside_visited(spec, level, values);
  ASSERT_GT(expected.size(), 100u);

  look_around(level, values, 0.f);

  EXPECT_EQ(std::set<int64_t>(level.queue.begin(), level.queue.end()), expected);
  EXPECT_EQ(level.queue.size(), expected.size()) << "a cell was queued twice";
}

// Runs one level's steps the way evaluate_grid_field_coarse_to_fine does,
// taking "evaluated" values from a dense grid.
void run_level(int level_resolution, bool coarse, std::span<const uint8_t> parent_surface,
               const ScalarGrid& dense, std::vector<float>& values, std::vector<uint8_t>& evaluated,
               LevelState& level) {
  std::vector<int64_t> points;
  auto evaluate = [&] {
    for (int64_t index : points) values[size_t(index)] = dense.values[size_t(index)];
  };
  const LevelCells& cells = level.cells;
  ASSERT_EQ(cells.cells_per_axis, int64_t(1) << level_resolution);
  if (coarse) {
    take_level_points(cells, evaluated, points);
    evaluate();
    seed_every_cell(level);
  } else {
    fill_from_parent(cells, evaluated, values);
    seed_children(parent_surface, 0, level);
  }
  for (;;) {
    while (!level.queue.empty()) {
      take_unevaluated_corners(level, evaluated, points);
      evaluate();
      grow_along_surface(level, values, 0.f);
    }
    look_around(level, values, 0.f);
    if (level.queue.empty()) break;
  }
}

TEST(CoarseToFineSteps, SurfaceCellsAgreeWithABruteForceSignCheck) {
  GridSpec spec;
  spec.resolution = 5;
  auto dense = evaluate_field_dense(torus_field(0.6f, 0.2f), spec);
  ASSERT_TRUE(dense.ok());
  std::vector<float> values(size_t(spec.point_count()), 0.f);
  std::vector<uint8_t> evaluated(size_t(spec.point_count()), 0);

  // Level 3, everything evaluated: surface cells are the crossing cells and
  // those near the surface by the local slope, computed here point by point.
  const LevelCells coarse_cells = LevelCells::at(spec, 3);
  LevelState coarse(coarse_cells);
  run_level(3, true, {}, *dense, values, evaluated, coarse);
  std::vector<uint8_t> coarse_surface(size_t(coarse_cells.count()), 0);
  const double margin = 2.0;
  const int64_t coarse_count = mark_surface_cells(coarse, values, 0.f, margin, coarse_surface);
  const int64_t n = spec.points_per_axis(), s = coarse_cells.stride;
  int64_t crossing = 0, near = 0;
  for (int64_t cell = 0; cell < coarse_cells.count(); ++cell) {
    const std::vector<float> corners = corner_values(spec, coarse_cells, values, cell);
    bool expected = has_both_signs(corners, 0.f);
    crossing += expected;
    if (!expected) {
      int64_t ci, cj, ck;
      coarse_cells.cell_coords(cell, ci, cj, ck);
      float nearest = INFINITY, steepest = 0.f;
      for (int c = 0; c < 8; ++c) {
        const Point p = {(ci + (c & 1)) * s, (cj + ((c >> 1) & 1)) * s, (ck + ((c >> 2) & 1)) * s};
        const float v = values[size_t(fine_index(spec, p))];
        nearest = std::min(nearest, std::fabs(v));
        for (const Point d : {Point{s, 0, 0}, Point{0, s, 0}, Point{0, 0, s}})
          for (int64_t sign : {-1, 1}) {
            const Point q = {p.i + sign * d.i, p.j + sign * d.j, p.k + sign * d.k};
            if (q.i < 0 || q.j < 0 || q.k < 0 || q.i >= n || q.j >= n || q.k >= n) continue;
            steepest = std::max(steepest, std::fabs(values[size_t(fine_index(spec, q))] - v));
          }
      }
      const double h = coarse_cells.cell_size;
      expected = double(nearest) <= margin * (double(steepest) / h) * (h * std::sqrt(3.0) * 0.5);
      near += expected;
    }
    ASSERT_EQ(coarse_surface[size_t(cell)], uint8_t(expected)) << "cell " << cell;
  }
  EXPECT_EQ(coarse_count, crossing + near);
  EXPECT_GT(crossing, 0);
  EXPECT_GT(near, 0);

  // Level 4 from level 3's surface cells: with no margin the surface cells
  // are exactly the cells with corners of both signs, visited or not.
  const LevelCells fine_cells = LevelCells::at(spec, 4);
  LevelState fine(fine_cells);
  run_level(4, false, coarse_surface, *dense, values, evaluated, fine);
  std::vector<uint8_t> fine_surface(size_t(fine_cells.count()), 0);
  const int64_t fine_count = mark_surface_cells(fine, values, 0.f, std::nullopt, fine_surface);
  int64_t fine_crossing = 0;
  for (int64_t cell = 0; cell < fine_cells.count(); ++cell) {
    const bool expected = has_both_signs(corner_values(spec, fine_cells, values, cell), 0.f);
    fine_crossing += expected;
    ASSERT_EQ(fine_surface[size_t(cell)], uint8_t(expected)) << "cell " << cell;
    // And the same as on the dense grid.
    ASSERT_EQ(expected, has_both_signs(corner_values(spec, fine_cells, dense->values, cell), 0.f)) << "cell " << cell;
  }
  EXPECT_EQ(fine_count, fine_crossing);
  // Some cells were never visited: their corners hold filled values.
  EXPECT_LT(int64_t(fine.visited_cells.size()), fine_cells.count());
}

}  // namespace
}  // namespace cubeforge
