// Surface samples for the encoder, Chamfer distance and IoU, each checked
// against geometry with a closed-form answer.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/surface_sampling.h"
#include "test_meshes.h"

namespace cubeforge {
namespace {

using testing::mesh_of_field;

TEST(Sampling, SamplesLieOnTheSurfaceWithOutwardUnitNormals) {
  const float radius = 0.8f;
  const Mesh sphere = mesh_of_field(sphere_field(radius), 6);
  auto samples = sample_surface(sphere, {8192, 7});
  ASSERT_TRUE(samples.ok()) << samples.error().to_string();
  ASSERT_EQ(samples->size(), size_t(8192 * 6));
  double mean_alignment = 0;
  for (size_t s = 0; s < 8192; ++s) {
    const float* p = &(*samples)[s * 6];
    const float* n = &(*samples)[s * 6 + 3];
    const double r = std::sqrt(double(p[0]) * p[0] + double(p[1]) * p[1] + double(p[2]) * p[2]);
    ASSERT_NEAR(r, radius, 2e-3) << "sample " << s;
    ASSERT_NEAR(std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]), 1.0, 1e-5);
    const double alignment = (p[0] * n[0] + p[1] * n[1] + p[2] * n[2]) / r;
    ASSERT_GT(alignment, 0.5) << "normal of sample " << s << " points inward";
    mean_alignment += alignment / 8192;
  }
  EXPECT_GT(mean_alignment, 0.99);
}

TEST(Sampling, DeterministicForASeed) {
  const Mesh sphere = mesh_of_field(sphere_field(0.5f), 4);
  auto a = sample_surface(sphere, {1000, 42});
  auto b = sample_surface(sphere, {1000, 42});
  auto c = sample_surface(sphere, {1000, 43});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(Sampling, CountsPerFaceFollowArea) {
  // Four separate triangles with areas 1 : 2 : 3 : 4.
  Mesh mesh;
  for (int t = 0; t < 4; ++t) {
    const float x = float(t) * 10.f, leg = std::sqrt(2.f * float(t + 1));
    mesh.positions.insert(mesh.positions.end(), {x, 0, 0, x + leg, 0, 0, x, leg, 0});
    mesh.indices.insert(mesh.indices.end(), {uint32_t(3 * t), uint32_t(3 * t + 1), uint32_t(3 * t + 2)});
  }
  const int64_t count = 40000;
  std::vector<uint32_t> faces;
  auto samples = sample_surface(mesh, {count, 5}, &faces);
  ASSERT_TRUE(samples.ok());
  int64_t per_face[4] = {};
  for (uint32_t f : faces) ++per_face[f];
  for (int t = 0; t < 4; ++t) {
    const double expected = double(t + 1) / 10.0;
    const double sigma = std::sqrt(expected * (1 - expected) / double(count));
    EXPECT_NEAR(double(per_face[t]) / double(count), expected, 4 * sigma) << "face " << t;
  }
  // Samples stay inside their triangle.
  for (int64_t s = 0; s < count; ++s) {
    const float* p = &(*samples)[size_t(s) * 6];
    const int t = int(faces[size_t(s)]);
    const float leg = std::sqrt(2.f * float(t + 1));
    const float u = p[0] - float(t) * 10.f, v = p[1];
    ASSERT_GE(u, -1e-5f);
    ASSERT_GE(v, -1e-5f);
    ASSERT_LE(u + v, leg * (1 + 1e-5f));
    ASSERT_EQ(p[2], 0.f);
  }
}

TEST(Sampling, EncoderCloudIsRescaledLikeTheReference) {
  // A box 4 x 2 x 1 centred at (3, -1, 2): the long side becomes 1.92.
  Mesh mesh = mesh_of_field(box_field({0.8f, 0.4f, 0.2f}), 5);
  for (size_t i = 0; i < mesh.positions.size(); ++i) {
    const float shift[3] = {3.f, -1.f, 2.f};
    mesh.positions[i] = mesh.positions[i] * 2.5f + shift[i % 3];
  }
  auto transform = unit_cube_transform(mesh);
  ASSERT_TRUE(transform.ok());
  Mesh scaled = mesh;
  apply_transform(scaled, *transform);
  const Bounds3 bounds = scaled.bounds();
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(bounds.min[a] + bounds.max[a], 0.f, 1e-5f);
  EXPECT_NEAR(bounds.max[0] - bounds.min[0], 1.92f, 1e-5f);

  auto cloud = encoder_point_cloud(mesh, {8192, 0});
  ASSERT_TRUE(cloud.ok());
  ASSERT_EQ(cloud->size(), size_t(8192 * 6));
  for (size_t s = 0; s < 8192; ++s)
    for (int a = 0; a < 3; ++a) ASSERT_LE(std::fabs((*cloud)[s * 6 + size_t(a)]), 0.96f + 1e-5f);

  EXPECT_FALSE(sample_surface(Mesh{}, {}).ok());
  EXPECT_FALSE(encoder_point_cloud(Mesh{}, {}).ok());
}

TEST(Chamfer, ConcentricSpheresAreTheirRadiusApart) {
  const Mesh inner = mesh_of_field(sphere_field(0.5f), 6);
  const Mesh outer = mesh_of_field(sphere_field(0.6f), 6);
  auto distance = chamfer_distance(inner, outer, {5000, 1, true});
  ASSERT_TRUE(distance.ok());
  EXPECT_NEAR(distance->a_to_b, 0.1, 0.003);
  EXPECT_NEAR(distance->b_to_a, 0.1, 0.003);
  EXPECT_NEAR(distance->hausdorff, 0.1, 0.005);
  auto same = chamfer_distance(inner, inner);
  ASSERT_TRUE(same.ok());
  EXPECT_LT(same->symmetric, 1e-6);
}

TEST(Chamfer, NearestTriangleMatchesBruteForce) {
  const Mesh torus = mesh_of_field(torus_field(0.6f, 0.2f), 4);
  const TriangleDistanceIndex index(torus);
  uint64_t state = 99;
  for (int q = 0; q < 200; ++q) {
    float p[3];
    for (float& x : p) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = float(int64_t(state >> 33) % 3000 - 1500) / 1000.f;  // also outside the mesh's box
    }
    double brute = INFINITY;
    for (size_t f = 0; f < torus.face_count(); ++f) {
      Mesh one;
      for (int c = 0; c < 3; ++c) {
        const float* v = &torus.positions[size_t(torus.indices[f * 3 + size_t(c)]) * 3];
        one.positions.insert(one.positions.end(), v, v + 3);
      }
      one.indices = {0, 1, 2};
      brute = std::min(brute, TriangleDistanceIndex(one).distance(p));
    }
    ASSERT_NEAR(index.distance(p), brute, 1e-9) << "query " << q;
  }
}

TEST(Iou, ConcentricBallsOverlapByTheirVolumeRatio) {
  GridSpec spec;
  spec.resolution = 6;
  auto small = evaluate_field_dense(sphere_field(0.5f), spec);
  auto large = evaluate_field_dense(sphere_field(0.6f), spec);
  ASSERT_TRUE(small.ok() && large.ok());
  const double exact = std::pow(0.5 / 0.6, 3);
  EXPECT_NEAR(occupancy_iou(small->values, large->values), exact, 0.02);
  EXPECT_DOUBLE_EQ(occupancy_iou(small->values, small->values), 1.0);

  auto mesh_overlap = mesh_iou(testing::mesh_of_field(sphere_field(0.5f), 6),
                               testing::mesh_of_field(sphere_field(0.6f), 6), spec);
  ASSERT_TRUE(mesh_overlap.ok());
  EXPECT_NEAR(*mesh_overlap, exact, 0.02);
}

TEST(Iou, InsideTestAgreesWithTheField) {
  // A torus: points in its hole are outside, the ray crosses it four times.
  GridSpec spec;
  spec.resolution = 5;
  const FieldFunction field = torus_field(0.6f, 0.25f, {0.02f, 0.01f, 0.0f});
  auto grid = evaluate_field_dense(field, spec);
  ASSERT_TRUE(grid.ok());
  auto mesh = marching_cubes(*grid);
  ASSERT_TRUE(mesh.ok());
  auto inside = mesh_inside_grid(*mesh, spec);
  ASSERT_TRUE(inside.ok());
  int64_t disagreements = 0, inside_count = 0;
  for (size_t p = 0; p < grid->values.size(); ++p) {
    const bool field_inside = grid->values[p] > 0;
    // A point within a fraction of a cell of the surface may fall either side
    // of the flat triangles.
    if (std::fabs(grid->values[p]) < 0.25 * spec.cell_size()) continue;
    disagreements += field_inside != bool((*inside)[p]);
    inside_count += field_inside;
  }
  EXPECT_EQ(disagreements, 0);
  EXPECT_GT(inside_count, 1000);
  EXPECT_EQ((*inside)[size_t(spec.point_index(16, 16, 16))], 0) << "the hole is outside";
}

}  // namespace
}  // namespace cubeforge
