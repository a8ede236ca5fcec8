// Offscreen renders of analytic meshes against their analytic projections:
// silhouette area (from the alpha channel, which is exact coverage with MSAA),
// centroid, and depth read back from a single-sample target.
#include <gtest/gtest.h>

#include <cmath>

#include "analytic_shapes.h"
#include "vulkan_fixture.h"

namespace cubeforge::engine::testing {
namespace {

constexpr int kSize = 256;
constexpr double kFovY = 40.0;

OrbitCamera camera_at(double distance, double yaw, double pitch) {
  OrbitCamera camera;
  camera.target = {0.f, 0.f, 0.f};
  camera.distance = float(distance);
  camera.yaw_degrees = float(yaw);
  camera.pitch_degrees = float(pitch);
  camera.fov_y_degrees = float(kFovY);
  camera.near_plane = 0.5f;
  camera.far_plane = 10.f;
  return camera;
}

using OffscreenRender = VulkanTest;

TEST_F(OffscreenRender, SphereSilhouetteCentroidAndDepth) {
  const double radius = 0.8, distance = 3.0;
  ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(float(radius), 96, 192)).ok());
  auto camera = camera_at(distance, 0, 0);

  auto target = make_offscreen(kSize, kSize);
  ASSERT_TRUE(target);
  EXPECT_EQ(target->samples(), choose_samples(*context_, VK_SAMPLE_COUNT_4_BIT));
  auto image = target->render_and_read(camera, measurement_settings());
  ASSERT_TRUE(image.ok()) << image.error().to_string();

  // The silhouette of a sphere seen from distance d is a circle of angular radius asin(r/d).
  Pinhole pinhole({0, 0, 0}, distance, 0, 0, kFovY, kSize, kSize);
  double silhouette_radius = pinhole.focal_px * std::tan(std::asin(radius / distance));
  double expected_area = kPi * silhouette_radius * silhouette_radius;
  Coverage coverage = measure_coverage(image->rgba, kSize, kSize);
  // Tessellation (192 slices) makes the inscribed mesh at most ~0.1% smaller.
  EXPECT_NEAR(coverage.area_px / expected_area, 1.0, 0.003) << "area " << coverage.area_px << " px, expected "
                                                            << expected_area;
  EXPECT_NEAR(coverage.cx, kSize / 2.0, 0.1);
  EXPECT_NEAR(coverage.cy, kSize / 2.0, 0.1);

  // Depth: single-sample target; the pole vertex faces the camera at d - r.
  auto depth_target = make_offscreen(kSize, kSize, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(depth_target);
  auto with_depth = depth_target->render_and_read(camera, measurement_settings(), true);
  ASSERT_TRUE(with_depth.ok()) << with_depth.error().to_string();
  ASSERT_EQ(with_depth->depth.size(), size_t(kSize) * kSize);
  double center_depth = with_depth->depth[size_t(kSize / 2) * kSize + kSize / 2];
  EXPECT_NEAR(linear_depth(center_depth, camera.near_plane, camera.far_plane), distance - radius, 2e-3);
  EXPECT_EQ(with_depth->depth[0], 1.f) << "background keeps the cleared far depth";
  // Single-sample coverage counts whole pixels: same area within the perimeter's quantisation.
  Coverage hard = measure_coverage(with_depth->rgba, kSize, kSize);
  EXPECT_NEAR(hard.area_px / expected_area, 1.0, 0.01);
}

TEST_F(OffscreenRender, RotatedBoxMatchesProjectedHull) {
  const std::array<float, 3> half{0.5f, 0.35f, 0.6f};
  ASSERT_TRUE(renderer_->meshes().upload(make_box(half)).ok());
  const double distance = 3.2, yaw = 30.0, pitch = 20.0;
  auto camera = camera_at(distance, yaw, pitch);
  auto target = make_offscreen(kSize, kSize, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(target);
  auto image = target->render_and_read(camera, measurement_settings(), true);
  ASSERT_TRUE(image.ok()) << image.error().to_string();
  auto msaa_target = make_offscreen(kSize, kSize);
  ASSERT_TRUE(msaa_target);
  auto smooth = msaa_target->render_and_read(camera, measurement_settings());
  ASSERT_TRUE(smooth.ok()) << smooth.error().to_string();

  Pinhole pinhole({0, 0, 0}, distance, yaw, pitch, kFovY, kSize, kSize);
  std::vector<std::array<double, 2>> corners;
  for (int sx : {-1, 1})
    for (int sy : {-1, 1})
      for (int sz : {-1, 1}) corners.push_back(pinhole.project({sx * half[0], sy * half[1], sz * half[2]}));
  Polygon2 hull = convex_hull_area(corners);
  Coverage coverage = measure_coverage(smooth->rgba, kSize, kSize);
  EXPECT_NEAR(coverage.area_px / hull.area, 1.0, 0.003) << "area " << coverage.area_px << " px, hull " << hull.area;
  EXPECT_NEAR(coverage.cx, hull.cx, 0.15);
  EXPECT_NEAR(coverage.cy, hull.cy, 0.15);

  // Depth along the ray through the centre pixel: slab intersection with the box.
  const int px = kSize / 2, py = kSize / 2;
  Vec3d ray = pinhole.ray(px + 0.5, py + 0.5);
  double t_near = -1e9, t_far = 1e9;
  double origin[3] = {pinhole.eye.x, pinhole.eye.y, pinhole.eye.z}, direction[3] = {ray.x, ray.y, ray.z};
  for (int a = 0; a < 3; ++a) {
    double t1 = (-half[a] - origin[a]) / direction[a], t2 = (half[a] - origin[a]) / direction[a];
    t_near = std::max(t_near, std::min(t1, t2));
    t_far = std::min(t_far, std::max(t1, t2));
  }
  ASSERT_LT(t_near, t_far);
  double expected_view_depth = t_near * dot(ray, pinhole.forward);
  double depth = image->depth[size_t(py) * kSize + px];
  EXPECT_NEAR(linear_depth(depth, camera.near_plane, camera.far_plane), expected_view_depth, 2e-3);
}

TEST_F(OffscreenRender, TorusAnnulusSeenAlongItsAxis) {
  const double major = 0.6, minor = 0.2, distance = 3.0;
  ASSERT_TRUE(renderer_->meshes().upload(make_torus(float(major), float(minor), 192, 64)).ok());
  auto target = make_offscreen(kSize, kSize);
  ASSERT_TRUE(target);
  auto image = target->render_and_read(camera_at(distance, 0, 0), measurement_settings());
  ASSERT_TRUE(image.ok()) << image.error().to_string();

  // In any plane through the axis the tube is a circle of radius `minor` at
  // (major, 0), seen from (0, distance): its tangents bound the annulus.
  Pinhole pinhole({0, 0, 0}, distance, 0, 0, kFovY, kSize, kSize);
  double center_angle = std::atan(major / distance);
  double half_width = std::asin(minor / std::hypot(major, distance));
  double outer = pinhole.focal_px * std::tan(center_angle + half_width);
  double inner = pinhole.focal_px * std::tan(center_angle - half_width);
  double expected_area = kPi * (outer * outer - inner * inner);
  Coverage coverage = measure_coverage(image->rgba, kSize, kSize);
  EXPECT_NEAR(coverage.area_px / expected_area, 1.0, 0.004) << "area " << coverage.area_px << " px, expected "
                                                            << expected_area;
  EXPECT_NEAR(coverage.cx, kSize / 2.0, 0.1);
  EXPECT_NEAR(coverage.cy, kSize / 2.0, 0.1);
  EXPECT_EQ(image->rgba[(size_t(kSize / 2) * kSize + kSize / 2) * 4 + 3], 0) << "the hole is empty";
}

TEST_F(OffscreenRender, WireframeChangesOnlyPixelsOnProjectedEdges) {
  ASSERT_TRUE(renderer_->supports_wireframe()) << "lavapipe and desktop GPUs offer fillModeNonSolid";
  const std::array<float, 3> half{0.5f, 0.5f, 0.5f};
  ASSERT_TRUE(renderer_->meshes().upload(make_box(half)).ok());
  const double distance = 3.0, yaw = 35.0, pitch = 25.0;
  auto camera = camera_at(distance, yaw, pitch);
  auto target = make_offscreen(kSize, kSize, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(target);
  SceneSettings settings = measurement_settings();
  auto plain = target->render_and_read(camera, settings);
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  settings.wireframe = true;
  auto wired = target->render_and_read(camera, settings);
  ASSERT_TRUE(wired.ok()) << wired.error().to_string();

  // Every triangle edge of the box (12 outline edges + 6 face diagonals), projected.
  Pinhole pinhole({0, 0, 0}, distance, yaw, pitch, kFovY, kSize, kSize);
  Mesh box = make_box(half);
  std::vector<std::array<double, 4>> segments;
  for (size_t f = 0; f < box.indices.size(); f += 3)
    for (int e = 0; e < 3; ++e) {
      uint32_t a = box.indices[f + e], b = box.indices[f + (e + 1) % 3];
      auto pa = pinhole.project({box.positions[3 * a], box.positions[3 * a + 1], box.positions[3 * a + 2]});
      auto pb = pinhole.project({box.positions[3 * b], box.positions[3 * b + 1], box.positions[3 * b + 2]});
      segments.push_back({pa[0], pa[1], pb[0], pb[1]});
    }
  auto distance_to_edges = [&](double x, double y) {
    double best = 1e9;
    for (const auto& s : segments) {
      double dx = s[2] - s[0], dy = s[3] - s[1];
      double t = std::clamp(((x - s[0]) * dx + (y - s[1]) * dy) / (dx * dx + dy * dy), 0.0, 1.0);
      best = std::min(best, std::hypot(x - (s[0] + t * dx), y - (s[1] + t * dy)));
    }
    return best;
  };

  int changed = 0, off_edge = 0, alpha_changed = 0;
  for (int y = 0; y < kSize; ++y)
    for (int x = 0; x < kSize; ++x) {
      size_t i = (size_t(y) * kSize + x) * 4;
      int difference = 0;
      for (int c = 0; c < 3; ++c) difference = std::max(difference, std::abs(plain->rgba[i + c] - wired->rgba[i + c]));
      if (plain->rgba[i + 3] != wired->rgba[i + 3]) alpha_changed++;
      if (difference > 8) {
        changed++;
        if (distance_to_edges(x + 0.5, y + 0.5) > 1.5) off_edge++;
      }
    }
  EXPECT_EQ(alpha_changed, 0) << "the overlay must not change coverage";
  EXPECT_EQ(off_edge, 0) << off_edge << " of " << changed << " changed pixels are not on a projected edge";
  // The visible edges of a unit box at this size are several hundred pixels long.
  EXPECT_GT(changed, 400);
}

TEST_F(OffscreenRender, BackgroundGradientAndEmptyScene) {
  auto target = make_offscreen(64, 64, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(target);
  SceneSettings settings = measurement_settings();
  settings.background_top = {1.f, 0.f, 0.f};
  settings.background_bottom = {0.f, 0.f, 1.f};
  auto image = target->render_and_read(camera_at(3, 0, 0), settings);
  ASSERT_TRUE(image.ok()) << image.error().to_string();
  auto pixel = [&](int x, int y, int c) { return int(image->rgba[(size_t(y) * 64 + x) * 4 + c]); };
  EXPECT_GT(pixel(32, 0, 0), 245);
  EXPECT_LT(pixel(32, 0, 2), 10);
  EXPECT_LT(pixel(32, 63, 0), 10);
  EXPECT_GT(pixel(32, 63, 2), 245);
  EXPECT_NEAR(pixel(32, 32, 0), 128, 6);
  EXPECT_EQ(measure_coverage(image->rgba, 64, 64).area_px, 0.0);
}

TEST_F(OffscreenRender, FlatAndSmoothShadingCoverTheSamePixels) {
  ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(0.8f, 12, 24, /*with_normals=*/false)).ok());
  auto target = make_offscreen(128, 128, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(target);
  SceneSettings settings = measurement_settings();
  auto smooth = target->render_and_read(camera_at(3, 20, 10), settings);
  settings.shading = ShadingMode::kFlat;
  auto flat = target->render_and_read(camera_at(3, 20, 10), settings);
  ASSERT_TRUE(smooth.ok() && flat.ok());
  int colour_differences = 0;
  for (size_t i = 0; i < smooth->rgba.size(); i += 4) {
    ASSERT_EQ(smooth->rgba[i + 3], flat->rgba[i + 3]) << "coverage differs at pixel " << i / 4;
    if (std::abs(smooth->rgba[i] - flat->rgba[i]) > 4) colour_differences++;
  }
  EXPECT_GT(colour_differences, 500) << "a coarse sphere looks faceted with flat shading";
}

TEST_F(OffscreenRender, GridDrawsOnTheGroundWithoutTouchingCoverage) {
  ASSERT_TRUE(renderer_->meshes().upload(make_box({0.5f, 0.5f, 0.5f})).ok());
  auto target = make_offscreen(128, 128, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(target);
  SceneSettings settings = measurement_settings();
  auto camera = camera_at(3, 30, 30);
  auto without = target->render_and_read(camera, settings);
  settings.grid = true;
  auto with = target->render_and_read(camera, settings);
  ASSERT_TRUE(without.ok() && with.ok());
  int changed_outside = 0, changed_inside = 0;
  for (size_t i = 0; i < with->rgba.size(); i += 4) {
    ASSERT_EQ(with->rgba[i + 3], without->rgba[i + 3]);
    bool changed = std::abs(with->rgba[i] - without->rgba[i]) > 2;
    (without->rgba[i + 3] == 255 ? changed_inside : changed_outside) += changed;
  }
  EXPECT_GT(changed_outside, 200) << "grid lines show around the mesh";
  EXPECT_EQ(changed_inside, 0) << "the mesh (fully covered pixels) hides the grid below it";
}

TEST_F(OffscreenRender, AutoFramingKeepsTheMeshInView) {
  Mesh sphere = make_uv_sphere(2.5f, 16, 32, true, {10.f, -4.f, 3.f});
  ASSERT_TRUE(renderer_->meshes().upload(sphere).ok());
  auto target = make_offscreen(128, 96, VK_SAMPLE_COUNT_1_BIT);
  ASSERT_TRUE(target);
  OrbitCamera camera;
  camera.yaw_degrees = 40.f;
  camera.pitch_degrees = 15.f;
  camera.frame(renderer_->mesh_bounds(), 128.f / 96.f);
  auto image = target->render_and_read(camera, measurement_settings());
  ASSERT_TRUE(image.ok());
  Coverage coverage = measure_coverage(image->rgba, 128, 96);
  EXPECT_NEAR(coverage.cx, 64, 1.0);
  EXPECT_NEAR(coverage.cy, 48, 1.0);
  // Nothing touches the border: the bounding sphere fits with margin.
  for (int x = 0; x < 128; ++x) {
    EXPECT_EQ(image->rgba[size_t(x) * 4 + 3], 0);
    EXPECT_EQ(image->rgba[(size_t(95) * 128 + x) * 4 + 3], 0);
  }
  EXPECT_GT(coverage.area_px, 0.1 * 128 * 96);
}

TEST_F(OffscreenRender, ResizeKeepsTheProjectionRight) {
  const double radius = 0.8, distance = 3.0;
  ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(float(radius), 48, 96)).ok());
  auto target = make_offscreen(64, 64);
  ASSERT_TRUE(target);
  ASSERT_TRUE(target->render_and_read(camera_at(distance, 0, 0), measurement_settings()).ok());
  EXPECT_FALSE(target->resize(0, 10).ok());
  ASSERT_TRUE(target->resize(160, 120).ok());
  auto image = target->render_and_read(camera_at(distance, 0, 0), measurement_settings());
  ASSERT_TRUE(image.ok()) << image.error().to_string();
  ASSERT_EQ(image->width, 160u);
  ASSERT_EQ(image->height, 120u);
  ASSERT_EQ(image->rgba.size(), size_t(160) * 120 * 4);
  // The vertical field of view is fixed: the silhouette scales with the height.
  Pinhole pinhole({0, 0, 0}, distance, 0, 0, kFovY, 160, 120);
  double r = pinhole.focal_px * std::tan(std::asin(radius / distance));
  Coverage coverage = measure_coverage(image->rgba, 160, 120);
  EXPECT_NEAR(coverage.area_px / (kPi * r * r), 1.0, 0.01);
  EXPECT_NEAR(coverage.cx, 80.0, 0.1);
  EXPECT_NEAR(coverage.cy, 60.0, 0.1);
}

}  // namespace
}  // namespace cubeforge::engine::testing
