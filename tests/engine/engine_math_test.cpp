// CPU-side engine maths: camera conventions and computed normals.
#include <gtest/gtest.h>

#include <cmath>

#include "analytic_shapes.h"
#include "engine/camera.h"
#include "engine/mesh_buffers.h"

namespace cubeforge::engine::testing {
namespace {

TEST(OrbitCamera, ProjectsLikeAPinholeCamera) {
  OrbitCamera camera;
  camera.distance = 4.f;
  camera.yaw_degrees = 50.f;
  camera.pitch_degrees = -20.f;
  camera.fov_y_degrees = 35.f;
  camera.near_plane = 0.1f;
  camera.far_plane = 50.f;
  const int w = 200, h = 100;
  Pinhole pinhole({0, 0, 0}, 4.0, 50.0, -20.0, 35.0, w, h);
  glm::mat4 vp = camera.view_projection(float(w) / h);
  for (Vec3d p : {Vec3d{0.3, 0.2, -0.1}, Vec3d{-0.7, 0.5, 0.4}, Vec3d{0.1, -0.9, 0.8}}) {
    glm::vec4 clip = vp * glm::vec4(float(p.x), float(p.y), float(p.z), 1.f);
    double u = (clip.x / clip.w * 0.5 + 0.5) * w, v = (clip.y / clip.w * 0.5 + 0.5) * h;
    auto expected = pinhole.project(p);
    EXPECT_NEAR(u, expected[0], 1e-3);
    EXPECT_NEAR(v, expected[1], 1e-3);
    EXPECT_GT(clip.z / clip.w, 0.f);
    EXPECT_LT(clip.z / clip.w, 1.f);
  }
}

TEST(OrbitCamera, FramingFitsTheBoundingSphere) {
  Bounds3 bounds;
  bounds.min = {1.f, 2.f, 3.f};
  bounds.max = {3.f, 6.f, 4.f};
  bounds.empty = false;
  OrbitCamera camera;
  camera.fov_y_degrees = 45.f;
  camera.frame(bounds, 0.5f, 1.0f);  // tall window: the horizontal field of view limits
  EXPECT_FLOAT_EQ(camera.target.x, 2.f);
  EXPECT_FLOAT_EQ(camera.target.y, 4.f);
  EXPECT_FLOAT_EQ(camera.target.z, 3.5f);
  double radius = std::sqrt(4.0 + 16.0 + 1.0) / 2.0;
  double half_fov_x = std::atan(std::tan(kPi / 8) * 0.5);
  EXPECT_NEAR(camera.distance, radius / std::sin(half_fov_x), 1e-4);
  EXPECT_LT(camera.near_plane, camera.distance - radius);
  EXPECT_GT(camera.far_plane, camera.distance + radius);
}

// A view framed for a region of the window (the app's free area between its
// panels) is the pinhole camera of that region's size, moved to its place.
TEST(OrbitCamera, ARegionIsThePinholeViewOfThatPartOfTheWindow) {
  const int w = 400, h = 200;
  OrbitCamera camera;
  camera.distance = 4.f;
  camera.yaw_degrees = 30.f;
  camera.pitch_degrees = 15.f;
  camera.fov_y_degrees = 40.f;
  camera.region = {0.25f, 0.1f, 0.75f, 0.6f};  // 200 x 100 pixels from (100, 20)
  Pinhole pinhole({0, 0, 0}, 4.0, 30.0, 15.0, 40.0, 200, 100);
  glm::mat4 vp = camera.view_projection(float(w) / h);
  for (Vec3d p : {Vec3d{0, 0, 0}, Vec3d{0.3, 0.2, -0.1}, Vec3d{-0.7, 0.5, 0.4}}) {
    glm::vec4 clip = vp * glm::vec4(float(p.x), float(p.y), float(p.z), 1.f);
    double u = (clip.x / clip.w * 0.5 + 0.5) * w, v = (clip.y / clip.w * 0.5 + 0.5) * h;
    auto expected = pinhole.project(p);
    EXPECT_NEAR(u, expected[0] + 100, 1e-3);
    EXPECT_NEAR(v, expected[1] + 20, 1e-3);
  }
  // Framing fits the region's own aspect: a tall region (40 x 160 pixels) of a
  // wide window, so the horizontal field limits.
  Bounds3 bounds;
  bounds.min = {-1.f, -1.f, -1.f};
  bounds.max = {1.f, 1.f, 1.f};
  bounds.empty = false;
  camera.region = {0.4f, 0.1f, 0.5f, 0.9f};
  camera.frame(bounds, float(w) / h, 1.0f);
  const double half_fov_x = std::atan(std::tan(kPi * 40.0 / 360.0) * 0.25);
  EXPECT_NEAR(camera.distance, std::sqrt(3.0) / std::sin(half_fov_x), 1e-3);
}

TEST(OrbitCamera, ControlsMoveAsDocumented) {
  OrbitCamera camera;
  camera.orbit(10.f, 200.f);
  EXPECT_FLOAT_EQ(camera.pitch_degrees, 89.f);
  camera = OrbitCamera{};
  float before = camera.distance;
  camera.zoom(1.f);
  EXPECT_FLOAT_EQ(camera.distance, before * 0.9f);
  camera = OrbitCamera{};
  camera.pan(0.5f, 0.f);
  EXPECT_GT(camera.target.x, 0.f);  // eye on +z: right is +x
  EXPECT_NEAR(camera.target.y, 0.f, 1e-6);
}

TEST(ComputedNormals, SphereNormalsPointAlongTheRadius) {
  Mesh sphere = make_uv_sphere(2.f, 24, 48, /*with_normals=*/false);
  auto normals = compute_vertex_normals(sphere);
  ASSERT_EQ(normals.size(), sphere.positions.size());
  std::vector<bool> used(sphere.vertex_count(), false);
  for (uint32_t i : sphere.indices) used[i] = true;
  double worst = 0;
  for (size_t v = 0; v < normals.size(); v += 3) {
    if (!used[v / 3]) continue;  // the UV sphere's seam has a vertex no face uses
    double cosine = (normals[v] * sphere.positions[v] + normals[v + 1] * sphere.positions[v + 1] +
                     normals[v + 2] * sphere.positions[v + 2]) / 2.0;
    worst = std::max(worst, 1.0 - cosine);
  }
  // Seam and pole vertices only see part of their fan, so allow a few degrees there.
  EXPECT_LT(worst, 1.0 - std::cos(6.0 * kPi / 180.0));
}

}  // namespace
}  // namespace cubeforge::engine::testing
