// Screenshots and turntables written as PNG and read back with stb_image, a
// second library: the files hold exactly the rendered pixels.
#include <gtest/gtest.h>

#include <stb_image.h>

#include <filesystem>

#include "analytic_shapes.h"
#include "engine/image_output.h"
#include "vulkan_fixture.h"

namespace cubeforge::engine::testing {
namespace {

using Screenshot = VulkanTest;

std::filesystem::path scratch_dir(const char* name) {
  auto dir = std::filesystem::temp_directory_path() / ("cubeforge-" + std::string(name) + "-" +
                                                       std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                                       "-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST_F(Screenshot, PngHoldsTheRenderedPixels) {
  ASSERT_TRUE(renderer_->meshes().upload(make_box({0.5f, 0.4f, 0.3f})).ok());
  auto target = make_offscreen(96, 64);
  ASSERT_TRUE(target);
  OrbitCamera camera;
  camera.yaw_degrees = 30.f;
  camera.pitch_degrees = 20.f;
  camera.frame(renderer_->mesh_bounds(), 96.f / 64.f);
  SceneSettings settings;
  auto image = target->render_and_read(camera, settings);
  ASSERT_TRUE(image.ok());
  auto dir = scratch_dir("screenshot");
  for (bool transparent : {false, true}) {
    auto path = (dir / (transparent ? "transparent.png" : "opaque.png")).string();
    ASSERT_TRUE(write_png(*image, path, transparent).ok());
    int w = 0, h = 0, channels = 0;
    uint8_t* pixels = stbi_load(path.c_str(), &w, &h, &channels, 4);
    ASSERT_NE(pixels, nullptr) << stbi_failure_reason();
    ASSERT_EQ(w, 96);
    ASSERT_EQ(h, 64);
    int mismatches = 0;
    for (size_t i = 0; i < image->rgba.size(); ++i) {
      uint8_t expected = (i % 4 == 3 && !transparent) ? 255 : image->rgba[i];
      mismatches += pixels[i] != expected;
    }
    stbi_image_free(pixels);
    EXPECT_EQ(mismatches, 0) << path;
  }
  auto bad = write_png(*image, (dir / "missing-folder" / "x.png").string());
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kIo);
  std::filesystem::remove_all(dir);
}

TEST_F(Screenshot, TurntableWritesEveryFrameFromAroundTheMesh) {
  ASSERT_TRUE(renderer_->meshes().upload(make_box({0.6f, 0.3f, 0.15f})).ok());
  auto target = make_offscreen(48, 48);
  ASSERT_TRUE(target);
  auto dir = scratch_dir("turntable");
  TurntableOptions options;
  options.frame_count = 4;
  options.path_pattern = (dir / "frame_%02d.png").string();
  auto written = save_turntable(*target, SceneSettings{}, options);
  ASSERT_TRUE(written.ok()) << written.error().to_string();
  EXPECT_EQ(*written, 4);
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 4; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "frame_%02d.png", i);
    int w, h, c;
    uint8_t* pixels = stbi_load((dir / name).string().c_str(), &w, &h, &c, 4);
    ASSERT_NE(pixels, nullptr) << name;
    frames.emplace_back(pixels, pixels + size_t(w) * h * 4);
    stbi_image_free(pixels);
  }
  // A flat slab seen from 0 and 90 degrees looks different; from 0 and 180 it is mirrored, not equal.
  EXPECT_NE(frames[0], frames[1]);
  EXPECT_NE(frames[1], frames[2]);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cubeforge::engine::testing
