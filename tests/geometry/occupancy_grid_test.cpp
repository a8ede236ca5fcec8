// Grid layout and coarse-to-fine evaluation against dense evaluation on
// analytic fields: the refined grid must classify every point as the dense
// grid does, and so give the same marching-cubes surface.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "inference/geometry/analytic_fields.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/occupancy_grid.h"

namespace cubeforge {
namespace {

TEST(GridSpec, AxisMatchesFloat32Linspace) {
  GridSpec spec;
  spec.resolution = 5;
  const std::vector<float> axis = grid_axis_coordinates(spec);
  ASSERT_EQ(axis.size(), 33u);
  EXPECT_EQ(axis.front(), -1.05f);
  EXPECT_EQ(axis.back(), 1.05f);
  // Values np.linspace(-1.05, 1.05, 33, dtype=np.float32) prints, exactly: the
  // bounds are float64 there, and float32 bounds move 14 of the 33 values.
  EXPECT_EQ(axis[1], -0.984375f);
  EXPECT_EQ(axis[4], -0.7875f);
  EXPECT_EQ(axis[31], 0.984375f);
  EXPECT_NEAR(axis[16], 0.f, 1e-7f);
  for (size_t i = 1; i < axis.size(); ++i) EXPECT_GT(axis[i], axis[i - 1]);
}

TEST(GridSpec, PointsAreXMajor) {
  GridSpec spec;
  spec.resolution = 2;
  const std::vector<float> axis = grid_axis_coordinates(spec);
  const std::vector<float> points = grid_points(spec);
  ASSERT_EQ(points.size(), size_t(5 * 5 * 5 * 3));
  const int64_t index = spec.point_index(1, 2, 3);
  EXPECT_EQ(index, (1 * 5 + 2) * 5 + 3);
  EXPECT_EQ(points[size_t(index) * 3 + 0], axis[1]);
  EXPECT_EQ(points[size_t(index) * 3 + 1], axis[2]);
  EXPECT_EQ(points[size_t(index) * 3 + 2], axis[3]);
}

struct CountingField {
  FieldFunction inner;
  int64_t points = 0;
  FieldFunction function() {
    return [this](std::span<const float> xyz, std::span<float> values) {
      points += int64_t(values.size());
      return inner(xyz, values);
    };
  }
};

void expect_same_surface_as_dense(const FieldFunction& field, int resolution, int coarse, const char* name) {
  SCOPED_TRACE(name);
  GridSpec spec;
  spec.resolution = resolution;
  auto dense = evaluate_field_dense(field, spec);
  ASSERT_TRUE(dense.ok()) << dense.error().to_string();

  CountingField counting{field};
  CoarseToFineOptions options;
  options.coarse_resolution = coarse;
  auto refined = evaluate_field_coarse_to_fine(counting.function(), spec, options);
  ASSERT_TRUE(refined.ok()) << refined.error().to_string();
  const CoarseToFineStats& stats = refined->stats;

  std::printf("%s: %lld of %lld points evaluated\n", name, (long long)stats.evaluated_points,
              (long long)stats.dense_points);
  EXPECT_EQ(count_sign_disagreements(*dense, refined->grid), 0);
  EXPECT_EQ(stats.evaluated_points, counting.points);
  EXPECT_EQ(stats.dense_points, spec.point_count());
  EXPECT_LT(stats.evaluated_points, spec.point_count() / 2) << "refinement saved less than half the points";
  int64_t per_level = 0;
  for (const auto& level : stats.levels) per_level += level.evaluated_points;
  EXPECT_EQ(per_level, stats.evaluated_points);
  // Every evaluated point holds exactly the dense value.
  for (size_t p = 0; p < dense->values.size(); ++p) {
    if (refined->evaluated[p]) {
      ASSERT_EQ(refined->grid.values[p], dense->values[p]) << "point " << p;
    }
  }

  auto dense_mesh = marching_cubes(*dense);
  auto refined_mesh = marching_cubes(refined->grid);
  ASSERT_TRUE(dense_mesh.ok() && refined_mesh.ok());
  EXPECT_EQ(dense_mesh->positions, refined_mesh->positions);
  EXPECT_EQ(dense_mesh->indices, refined_mesh->indices);
}

TEST(CoarseToFine, SphereMatchesDense) {
  expect_same_surface_as_dense(sphere_field(0.7f, {0.05f, -0.1f, 0.02f}), 6, 3, "sphere from level 3");
  expect_same_surface_as_dense(sphere_field(0.7f, {0.05f, -0.1f, 0.02f}), 6, 5, "sphere from level 5");
}

TEST(CoarseToFine, TorusMatchesDense) {
  expect_same_surface_as_dense(torus_field(0.6f, 0.2f), 6, 3, "torus from level 3");
}

TEST(CoarseToFine, ThinShapesMatchDense) {
  expect_same_surface_as_dense(thin_shapes_field(), 6, 3, "thin shapes from level 3");
  expect_same_surface_as_dense(thin_shapes_field(), 6, 4, "thin shapes from level 4");
}

TEST(CoarseToFine, SteepLogitsMatchDense) {
  // A logit-like field: steep at the surface, flat far from it.
  FieldFunction sdf = thin_shapes_field();
  FieldFunction steep = [sdf](std::span<const float> xyz, std::span<float> values) -> Status {
    CUBEFORGE_TRY(sdf(xyz, values));
    for (float& v : values) v = 12.f * std::tanh(v * 20.f);
    return ok_status();
  };
  expect_same_surface_as_dense(steep, 6, 4, "saturated thin shapes from level 4");
}

// Flat planes a little thinner than a target cell, each centred on target
// points that the level below does not have. No coarser point is inside, so
// no cell crosses the surface before the target level: only the near-surface
// margins find them, and without the last level's margin they vanish.
FieldFunction hidden_plates_field(const GridSpec& spec) {
  const std::vector<float> axis = grid_axis_coordinates(spec);
  const float half_thickness = 0.4f * float(spec.cell_size());
  // x = axis[2^r / 2 + 1] and y = axis[2^r / 4 + 3]: odd indices.
  const float x0 = axis[size_t(spec.cells_per_axis() / 2 + 1)];
  const float y0 = axis[size_t(spec.cells_per_axis() / 4 + 3)];
  return [=](std::span<const float> xyz, std::span<float> values) -> Status {
    for (size_t p = 0; p < values.size(); ++p) {
      const float to_x = half_thickness - std::fabs(xyz[p * 3] - x0);
      const float to_y = half_thickness - std::fabs(xyz[p * 3 + 1] - y0);
      values[p] = std::max(to_x, to_y);  // inside positive
    }
    return ok_status();
  };
}

TEST(CoarseToFine, PlatesBetweenTheLastLevelsPointsMatchDense) {
  GridSpec spec;
  spec.resolution = 6;
  const FieldFunction plates = hidden_plates_field(spec);
  expect_same_surface_as_dense(plates, 6, 3, "hidden plates from level 3");

  // The test can fail: without the last level's margin the plates are lost.
  auto dense = evaluate_field_dense(plates, spec);
  ASSERT_TRUE(dense.ok());
  CoarseToFineOptions blind;
  blind.coarse_resolution = 3;
  blind.final_near_surface_margin = 0.f;
  auto refined = evaluate_field_coarse_to_fine(plates, spec, blind);
  ASSERT_TRUE(refined.ok());
  EXPECT_GT(count_sign_disagreements(*dense, refined->grid), 0);
}

TEST(CoarseToFine, CoarseLevelAtTheTargetIsDense) {
  GridSpec spec;
  spec.resolution = 4;
  CoarseToFineOptions options;
  options.coarse_resolution = 9;  // clamped to the target
  auto refined = evaluate_field_coarse_to_fine(sphere_field(0.5f), spec, options);
  ASSERT_TRUE(refined.ok());
  EXPECT_EQ(refined->stats.evaluated_points, spec.point_count());
  ASSERT_EQ(refined->stats.levels.size(), 1u);
  EXPECT_EQ(refined->stats.levels[0].resolution, 4);
  auto dense = evaluate_field_dense(sphere_field(0.5f), spec);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(refined->grid.values, dense->values);
}

TEST(CoarseToFine, ReportsFieldErrorsAndCancellation) {
  GridSpec spec;
  spec.resolution = 4;
  FieldFunction failing = [](std::span<const float>, std::span<float>) -> Status {
    return make_error(ErrorCode::kInternal, "decoder out of memory");
  };
  auto failed = evaluate_field_coarse_to_fine(failing, spec);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("decoder out of memory"), std::string::npos);

  FieldFunction not_a_number = [](std::span<const float>, std::span<float> values) -> Status {
    for (float& v : values) v = NAN;
    return ok_status();
  };
  auto nan = evaluate_field_dense(not_a_number, spec);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.error().message.find("nan"), std::string::npos) << nan.error().message;

  CoarseToFineOptions options;
  options.evaluation.chunk_points = 100;
  options.evaluation.progress = [](int64_t done, int64_t) { return done < 300; };
  auto cancelled = evaluate_field_coarse_to_fine(sphere_field(0.5f), spec, options);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kCancelled);

  spec.resolution = 0;
  EXPECT_FALSE(evaluate_field_dense(sphere_field(0.5f), spec).ok());
}

TEST(CoarseToFine, ChunksNeverExceedTheLimit) {
  GridSpec spec;
  spec.resolution = 5;
  int64_t largest = 0;
  FieldFunction sphere = sphere_field(0.5f);
  FieldFunction watched = [&](std::span<const float> xyz, std::span<float> values) {
    largest = std::max<int64_t>(largest, int64_t(values.size()));
    return sphere(xyz, values);
  };
  CoarseToFineOptions options;
  options.coarse_resolution = 3;
  options.evaluation.chunk_points = 777;
  ASSERT_TRUE(evaluate_field_coarse_to_fine(watched, spec, options).ok());
  EXPECT_LE(largest, 777);
  EXPECT_GT(largest, 0);
}

// A field told the level (CoarseToFineOptions::begin_level) is asked only for
// points of that level's lattice, every level begins once, coarse first, and
// the levels' points add up to the evaluations.
TEST(CoarseToFine, EachLevelBeginsBeforeItsPointsAreAsked) {
  GridSpec spec;
  spec.resolution = 6;
  const GridFieldFunction sphere = field_on_grid(sphere_field(0.6f, {0.1f, 0.f, -0.05f}), spec);
  std::vector<int> begun;
  std::vector<int64_t> asked_per_level;
  int64_t off_lattice = 0;
  CoarseToFineOptions options;
  options.coarse_resolution = 3;
  options.begin_level = [&](int resolution) {
    begun.push_back(resolution);
    asked_per_level.push_back(0);
  };
  const GridFieldFunction watched = [&](std::span<const int32_t> ijk, std::span<float> values) -> Status {
    if (begun.empty()) return make_error(ErrorCode::kInternal, "asked before any level began");
    const int32_t stride = int32_t(1) << (spec.resolution - begun.back());
    for (int32_t index : ijk) off_lattice += index % stride != 0;
    asked_per_level.back() += int64_t(values.size());
    return sphere(ijk, values);
  };
  auto refined = evaluate_grid_field_coarse_to_fine(watched, spec, options);
  ASSERT_TRUE(refined.ok()) << refined.error().to_string();
  EXPECT_EQ(begun, (std::vector<int>{3, 4, 5, 6}));
  EXPECT_EQ(off_lattice, 0);
  ASSERT_EQ(refined->stats.levels.size(), asked_per_level.size());
  for (size_t l = 0; l < asked_per_level.size(); ++l)
    EXPECT_EQ(asked_per_level[l], refined->stats.levels[l].evaluated_points) << "level " << begun[l];
  EXPECT_EQ(asked_per_level[0], 9 * 9 * 9);  // the coarse level, densely
}

}  // namespace
}  // namespace cubeforge
