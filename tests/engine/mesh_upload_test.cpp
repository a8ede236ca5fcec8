// Mesh buffers: double-buffered updates show the newest mesh every frame,
// 200 uploads of varying sizes return every allocation, invalid meshes are
// errors, and the staging path is what runs without CUDA interop.
#include <gtest/gtest.h>

#include <random>

#include "analytic_shapes.h"
#include "vulkan_fixture.h"

namespace cubeforge::engine::testing {
namespace {

using MeshUpload = VulkanTest;

OrbitCamera front_camera() {
  OrbitCamera camera;
  camera.distance = 3.f;
  camera.fov_y_degrees = 40.f;
  camera.near_plane = 0.5f;
  camera.far_plane = 10.f;
  return camera;
}

TEST_F(MeshUpload, EachFrameShowsTheLatestMesh) {
  auto target = make_offscreen(96, 96);
  ASSERT_TRUE(target);
  Pinhole pinhole({0, 0, 0}, 3.0, 0, 0, 40.0, 96, 96);
  for (int i = 0; i < 8; ++i) {
    double radius = 0.3 + 0.07 * i;
    ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(float(radius), 32, 64)).ok());
    auto image = target->render_and_read(front_camera(), measurement_settings());
    ASSERT_TRUE(image.ok());
    double r = pinhole.focal_px * std::tan(std::asin(radius / 3.0));
    EXPECT_NEAR(measure_coverage(image->rgba, 96, 96).area_px / (kPi * r * r), 1.0, 0.02) << "update " << i;
  }
}

TEST_F(MeshUpload, UploadsWhileFramesAreInFlight) {
  // Uploads between non-waiting renders: the slot on screen is never overwritten.
  auto target = make_offscreen(64, 64);
  ASSERT_TRUE(target);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(0.5f + 0.02f * i, 16, 32)).ok());
    ASSERT_TRUE(target->render(front_camera(), measurement_settings()).ok());
  }
  auto image = target->render_and_read(front_camera(), measurement_settings());
  ASSERT_TRUE(image.ok());
  Pinhole pinhole({0, 0, 0}, 3.0, 0, 0, 40.0, 64, 64);
  double r = pinhole.focal_px * std::tan(std::asin((0.5 + 0.02 * 11) / 3.0));
  EXPECT_NEAR(measure_coverage(image->rgba, 64, 64).area_px / (kPi * r * r), 1.0, 0.03);
}

TEST_F(MeshUpload, TwoHundredUploadsLeakNothing) {
  auto target = make_offscreen(64, 64);
  ASSERT_TRUE(target);
  ResourceCounters& counters = context_->counters();
  const int64_t buffers = counters.buffers, images = counters.images, allocations = counters.allocations,
                bytes = counters.allocated_bytes;
  std::mt19937 random(1234);
  std::uniform_int_distribution<int> slices(4, 96);
  for (int i = 0; i < 200; ++i) {
    int s = slices(random);
    ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(0.8f, std::max(2, s / 2), s, i % 3 != 0)).ok()) << i;
    if (i % 10 == 0) {
      ASSERT_TRUE(target->render(front_camera(), measurement_settings()).ok());
    }
  }
  const auto& stats = renderer_->meshes().statistics();
  EXPECT_EQ(stats.uploads, 200u);
  // Geometric growth: a few (re)allocations per slot, not one per upload.
  EXPECT_LE(stats.buffer_allocations, 30u);
  EXPECT_GT(counters.allocations.load(), allocations);

  renderer_->meshes().clear();
  context_->wait_idle();
  EXPECT_EQ(context_->pending_destructions(), 0u);
  EXPECT_EQ(counters.buffers.load(), buffers);
  EXPECT_EQ(counters.images.load(), images);
  EXPECT_EQ(counters.allocations.load(), allocations);
  EXPECT_EQ(counters.allocated_bytes.load(), bytes);
  // The validation layer also reports any VkBuffer/VkDeviceMemory left at device destruction (TearDown).
}

TEST_F(MeshUpload, InvalidMeshesAreErrors) {
  Mesh mesh = make_box({0.5f, 0.5f, 0.5f});
  mesh.indices[7] = 1000;
  auto status = renderer_->meshes().upload(mesh);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(status.error().message.find("index 7 is 1000"), std::string::npos) << status.error().message;

  Mesh ragged = make_box({0.5f, 0.5f, 0.5f});
  ragged.normals.resize(9);
  EXPECT_FALSE(renderer_->meshes().upload(ragged).ok());
  EXPECT_FALSE(renderer_->meshes().drawable().has_value()) << "a failed upload leaves the view as it was";
}

TEST_F(MeshUpload, StagingPathWithoutInteropAndItsStatistic) {
  const auto& stats = renderer_->meshes().statistics();
  if (renderer_->meshes().interop_active()) {
    EXPECT_EQ(stats.path, UploadPath::kCudaInterop);
  } else {
    EXPECT_EQ(stats.path, UploadPath::kStaging);
    EXPECT_FALSE(stats.interop_unavailable_reason.empty());
    auto write = renderer_->meshes().begin_device_write(3, 1);
    EXPECT_FALSE(write.ok()) << "device writes need interop";
  }
  ASSERT_TRUE(renderer_->meshes().upload(make_box({1.f, 1.f, 1.f})).ok());
  EXPECT_EQ(stats.bytes, 24u * 24u + 36u * 4u);
  EXPECT_STREQ(upload_path_name(stats.path), stats.path == UploadPath::kStaging ? "staging" : "cuda-interop");
}

}  // namespace
}  // namespace cubeforge::engine::testing
