// Marching cubes on analytic fields (exact area, volume and topology known) and
// on the reference's own grid, compared with the reference's mesh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numbers>

#include "inference/geometry/analytic_fields.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/tensor/safetensors.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

constexpr double kPi = std::numbers::pi;

Mesh mesh_of(const FieldFunction& field, int resolution, VertexMapping mapping = VertexMapping::kCellSize) {
  GridSpec spec;
  spec.resolution = resolution;
  auto grid = evaluate_field_dense(field, spec);
  EXPECT_TRUE(grid.ok());
  MarchingCubesOptions options;
  options.mapping = mapping;
  auto mesh = marching_cubes(*grid, options);
  EXPECT_TRUE(mesh.ok()) << mesh.error().to_string();
  return std::move(mesh).value();
}

void expect_closed_solid(const Mesh& mesh, double area, double volume, int64_t euler,
                         double area_tolerance = 0.01) {
  const MeshTopology topology = analyze_topology(mesh);
  EXPECT_EQ(topology.boundary_edges, 0);
  EXPECT_EQ(topology.non_manifold_edges, 0);
  EXPECT_EQ(topology.misoriented_edges, 0);
  EXPECT_EQ(topology.components, 1);
  EXPECT_EQ(topology.euler_characteristic(), euler);
  EXPECT_EQ(topology.vertices, int64_t(mesh.vertex_count())) << "every vertex is used";
  EXPECT_NEAR(surface_area(mesh), area, area_tolerance * area);
  EXPECT_GT(signed_volume(mesh), 0.0) << "faces must wind outward";
  EXPECT_NEAR(signed_volume(mesh), volume, 0.01 * volume);
}

TEST(MarchingCubes, TableIsComplete) {
  // Cases whose loops cannot be split without a chord along a cube face get a
  // centre vertex; they exist but are few.
  const int with_centre = marching_cubes_cases_with_centre_vertex();
  EXPECT_LT(with_centre, 16384 / 4);
  std::printf("cases with a centre vertex: %d of 16384\n", with_centre);
}

TEST(MarchingCubes, Sphere) {
  const float r = 0.8f;
  const Mesh mesh = mesh_of(sphere_field(r, {0.03f, -0.02f, 0.01f}), 6);
  expect_closed_solid(mesh, 4 * kPi * r * r, 4.0 / 3.0 * kPi * r * r * r, 2);
  // Vertices lie on the sphere (linear interpolation of an exact distance).
  for (size_t v = 0; v < mesh.vertex_count(); ++v) {
    const float* p = &mesh.positions[v * 3];
    const double d = std::sqrt((p[0] - 0.03) * (p[0] - 0.03) + (p[1] + 0.02) * (p[1] + 0.02) + (p[2] - 0.01) * (p[2] - 0.01));
    ASSERT_NEAR(d, r, 2e-3);
  }
}

TEST(MarchingCubes, Torus) {
  const double major = 0.6, minor = 0.25;
  const Mesh mesh = mesh_of(torus_field(float(major), float(minor), {0.01f, 0.02f, -0.03f}), 6);
  expect_closed_solid(mesh, 4 * kPi * kPi * major * minor, 2 * kPi * kPi * major * minor * minor, 0);
}

TEST(MarchingCubes, Box) {
  // Sharp edges: a cell holding an edge sees a field that is not linear
  // there, and marching cubes bevels the edge. The bevel costs about 0.015 of
  // area per unit of edge length at this resolution (3% of this box's area,
  // halving with each finer level); the volume it cuts is tiny.
  const double a = 0.6, b = 0.5, c = 0.4;
  const Mesh mesh = mesh_of(box_field({float(a), float(b), float(c)}, {0.013f, -0.021f, 0.007f}), 6);
  const double area = 8 * (a * b + b * c + c * a);
  expect_closed_solid(mesh, area, 8 * a * b * c, 2, /*area_tolerance=*/0.035);
  EXPECT_LT(surface_area(mesh), area) << "bevels remove area, never add it";
}

TEST(MarchingCubes, RoundedBox) {
  // Edges rounded over a few cells: within 1% for area and volume.
  const double r = 0.12;
  const double x = 2 * (0.6 - r), y = 2 * (0.5 - r), z = 2 * (0.4 - r);  // the flat faces' sides
  const double area = 2 * (x * y + y * z + z * x) + 2 * kPi * r * (x + y + z) + 4 * kPi * r * r;
  const double volume = x * y * z + 2 * r * (x * y + y * z + z * x) + kPi * r * r * (x + y + z) + 4.0 / 3.0 * kPi * r * r * r;
  const Mesh mesh = mesh_of(rounded_box_field({0.6f, 0.5f, 0.4f}, float(r), {0.013f, -0.021f, 0.007f}), 6);
  expect_closed_solid(mesh, area, volume, 2);
}

TEST(MarchingCubes, ThinShapesStayManifold) {
  const Mesh mesh = mesh_of(thin_shapes_field(), 6);
  const MeshTopology topology = analyze_topology(mesh);
  EXPECT_EQ(topology.boundary_edges, 0);
  EXPECT_EQ(topology.non_manifold_edges, 0);
  EXPECT_EQ(topology.misoriented_edges, 0);
  EXPECT_GT(signed_volume(mesh), 0.0);
}

TEST(MarchingCubes, RandomFieldsAreClosedAndOriented) {
  // Noise exercises every ambiguous face; a field that is negative on the
  // grid's boundary must still give a closed, consistently wound surface.
  GridSpec spec;
  spec.resolution = 4;
  uint64_t state = 12345;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> values(size_t(spec.point_count()));
    const int64_t n = spec.points_per_axis();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < n; ++k) {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          const float noise = float(int64_t(state >> 40) % 2001 - 1000) / 1000.f;
          const bool border = i == 0 || j == 0 || k == 0 || i == n - 1 || j == n - 1 || k == n - 1;
          values[size_t(spec.point_index(i, j, k))] = border ? -1.f : noise + 0.1f * float(trial % 5 - 2);
        }
    auto mesh = marching_cubes(values, spec);
    ASSERT_TRUE(mesh.ok());
    const MeshTopology topology = analyze_topology(*mesh);
    ASSERT_EQ(topology.boundary_edges, 0) << "trial " << trial;
    ASSERT_EQ(topology.non_manifold_edges, 0) << "trial " << trial;
    ASSERT_EQ(topology.misoriented_edges, 0) << "trial " << trial;
    ASSERT_GT(signed_volume(*mesh), 0.0) << "trial " << trial;
  }
}

TEST(MarchingCubes, PartsJoinIntoTheMeshOfOneSweep) {
  // Parts made in parallel each re-make the vertices of their first plane;
  // joined, they must give one sweep's mesh exactly: same vertices in the same
  // order, same triangles, nothing duplicated along the cuts.
  GridSpec spec;
  spec.resolution = 5;
  const int64_t n = spec.points_per_axis();
  std::vector<float> values(size_t(spec.point_count()));
  uint64_t state = 777;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const float noise = float(int64_t(state >> 40) % 2001 - 1000) / 1000.f;
        values[size_t(spec.point_index(i, j, k))] = noise;
      }
  MarchingCubesOptions one;
  one.parts = 1;
  auto whole = marching_cubes(values, spec, one);
  ASSERT_TRUE(whole.ok());
  ASSERT_GT(whole->face_count(), 1000u);
  for (int parts : {0, 2, 3, 5, 8, 100}) {
    MarchingCubesOptions options;
    options.parts = parts;
    auto joined = marching_cubes(values, spec, options);
    ASSERT_TRUE(joined.ok());
    EXPECT_EQ(joined->positions, whole->positions) << parts << " parts";
    EXPECT_EQ(joined->indices, whole->indices) << parts << " parts";
  }
}

TEST(MarchingCubes, ReferenceMappingShrinksTowardsTheLowerCorner) {
  const FieldFunction field = sphere_field(0.5f, {0.1f, 0.0f, -0.1f});
  const Mesh cell = mesh_of(field, 5, VertexMapping::kCellSize);
  const Mesh reference = mesh_of(field, 5, VertexMapping::kReference);
  ASSERT_EQ(cell.positions.size(), reference.positions.size());
  EXPECT_EQ(cell.indices, reference.indices);
  const double shrink = 32.0 / 33.0;
  for (size_t i = 0; i < cell.positions.size(); ++i)
    ASSERT_NEAR(reference.positions[i], (cell.positions[i] + 1.05) * shrink - 1.05, 2e-6);
}

TEST(MarchingCubes, EmptyAndFullFieldsGiveNoSurface) {
  GridSpec spec;
  spec.resolution = 3;
  std::vector<float> values(size_t(spec.point_count()), -1.f);
  auto empty = marching_cubes(values, spec);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  std::fill(values.begin(), values.end(), 1.f);
  auto full = marching_cubes(values, spec);
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->empty());
  values.pop_back();
  EXPECT_FALSE(marching_cubes(values, spec).ok());
}

TEST(MarchingCubes, MatchesReferenceMeshOnReferenceGrid) {
  const std::filesystem::path file = testing::oracle_dir() / "expected.safetensors";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "reference fixtures not found at " << file << "; set CUBEFORGE_ORACLE_DIR";
  auto expected = SafetensorsFile::open(file);
  ASSERT_TRUE(expected.ok()) << expected.error().to_string();
  const int64_t grid_shape[3] = {33, 33, 33};
  auto logits = expected->read_f32("decode.grid_logits_r5", grid_shape);
  ASSERT_TRUE(logits.ok()) << logits.error().to_string();

  GridSpec spec;
  spec.resolution = 5;
  MarchingCubesOptions options;
  options.mapping = VertexMapping::kReference;
  auto mesh = marching_cubes(*logits, spec, options);
  ASSERT_TRUE(mesh.ok()) << mesh.error().to_string();

  if (!expected->contains("decode.mesh_vertices")) {
    EXPECT_TRUE(mesh->empty()) << "the reference found no surface in this grid";
    return;
  }
  auto vertices = expected->read_f32("decode.mesh_vertices");
  auto faces = expected->read_i64("decode.mesh_faces");
  ASSERT_TRUE(vertices.ok() && faces.ok());
  Mesh reference;
  reference.positions = *vertices;
  for (int64_t index : *faces) reference.indices.push_back(uint32_t(index));
  ASSERT_FALSE(mesh->empty());

  auto chamfer = chamfer_distance(*mesh, reference);
  ASSERT_TRUE(chamfer.ok()) << chamfer.error().to_string();
  const double diagonal = bounding_diagonal(reference);
  std::printf("reference: %zu vertices %zu faces; ours: %zu vertices %zu faces; Chamfer %.3g (%.3g%% of diagonal)\n",
              reference.vertex_count(), reference.face_count(), mesh->vertex_count(), mesh->face_count(),
              chamfer->symmetric, 100 * chamfer->symmetric / diagonal);
  EXPECT_LT(chamfer->symmetric, 0.01 * diagonal);
  // Same winding: each of our faces faces the same way as the reference face
  // nearest to its centre.
  const TriangleDistanceIndex index(reference);
  size_t agree = 0;
  for (size_t f = 0; f < mesh->face_count(); ++f) {
    float centre[3], normal[3], reference_normal[3];
    const float* p[3];
    const float* q[3];
    for (int c = 0; c < 3; ++c) p[c] = &mesh->positions[size_t(mesh->indices[f * 3 + size_t(c)]) * 3];
    for (int a = 0; a < 3; ++a) centre[a] = (p[0][a] + p[1][a] + p[2][a]) / 3.f;
    uint32_t nearest = 0;
    index.distance(centre, &nearest);
    for (int c = 0; c < 3; ++c) q[c] = &reference.positions[size_t(reference.indices[size_t(nearest) * 3 + size_t(c)]) * 3];
    auto face_normal = [](const float* const* t, float* out) {
      const float u[3] = {t[1][0] - t[0][0], t[1][1] - t[0][1], t[1][2] - t[0][2]};
      const float v[3] = {t[2][0] - t[0][0], t[2][1] - t[0][1], t[2][2] - t[0][2]};
      out[0] = u[1] * v[2] - u[2] * v[1];
      out[1] = u[2] * v[0] - u[0] * v[2];
      out[2] = u[0] * v[1] - u[1] * v[0];
    };
    face_normal(p, normal);
    face_normal(q, reference_normal);
    agree += normal[0] * reference_normal[0] + normal[1] * reference_normal[1] + normal[2] * reference_normal[2] > 0;
  }
  EXPECT_GT(double(agree), 0.98 * double(mesh->face_count()));
}

}  // namespace
}  // namespace cubeforge
