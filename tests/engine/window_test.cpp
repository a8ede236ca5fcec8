// A GLFW window (under Xvfb in CI) renders, resizes and rebuilds its
// swapchain; the overlay hook records inside the window's render pass.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "analytic_shapes.h"
#include "window_fixture.h"

namespace cubeforge::engine::testing {
namespace {

// Windows of tests run side by side come and go on one display. An X server
// that resets when its last client leaves drops a client that connects during
// the reset (its XOpenDisplay fails): two processes starting and stopping GLFW
// many times would meet that window. The test display runs without resets.
TEST(WindowSystem, ReachesTheDisplayWhileOtherClientsComeAndGo) {
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
    GTEST_SKIP() << "no display (DISPLAY unset); tools/test.sh gives window tests a display";
  constexpr int kProcesses = 2, kStartsEach = 100;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t child = fork();
    ASSERT_GE(child, 0) << "fork failed";
    if (child == 0) {
      int failures = 0;
      for (int start = 0; start < kStartsEach; ++start) {
        if (initialise_window_system().ok()) glfwTerminate();
        else ++failures;
      }
      _exit(failures > 255 ? 255 : failures);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "starts of GLFW that could not reach the display, of " << kStartsEach;
  }
}

TEST_F(WindowRender, RendersResizesAndRebuildsTheSwapchain) {
  WindowOptions options;
  options.vsync = false;
  auto target = WindowTarget::create(*renderer_, window_, options);
  ASSERT_TRUE(target.ok()) << target.error().to_string();
  target_ = std::move(target).value();
  EXPECT_EQ(target_->swapchain_builds(), 1);
  EXPECT_EQ(target_->extent().width, 160u);
  EXPECT_EQ(target_->extent().height, 120u);

  WindowVulkanHandles handles = target_->vulkan_handles();
  EXPECT_EQ(handles.device, context_->device());
  EXPECT_NE(handles.render_pass, VkRenderPass(VK_NULL_HANDLE));
  EXPECT_GE(handles.image_count, handles.min_image_count);
  EXPECT_GE(handles.min_image_count, 2u);

  ASSERT_TRUE(renderer_->meshes().upload(make_uv_sphere(0.8f, 16, 32)).ok());
  OrbitCamera camera;
  camera.frame(renderer_->mesh_bounds(), 160.f / 120.f);
  int overlay_calls = 0;
  auto overlay = [&](VkCommandBuffer cmd) {
    EXPECT_NE(cmd, VkCommandBuffer(VK_NULL_HANDLE));
    overlay_calls++;
  };
  SceneSettings settings;
  settings.wireframe = true;
  for (int i = 0; i < 4; ++i) {
    glfwPollEvents();
    auto status = target_->draw_frame(camera, settings, overlay);
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    EXPECT_EQ(*status, FrameStatus::kPresented);
  }
  EXPECT_EQ(overlay_calls, 4);

  glfwSetWindowSize(window_, 240, 180);
  int presented_at_new_size = 0;
  for (int i = 0; i < 200 && presented_at_new_size < 3; ++i) {
    glfwPollEvents();
    auto status = target_->draw_frame(camera, settings, overlay);
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    if (*status == FrameStatus::kPresented && target_->extent().width == 240u) presented_at_new_size++;
    if (target_->extent().width != 240u) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(presented_at_new_size, 3) << "the window never reached 240x180";
  EXPECT_GE(target_->swapchain_builds(), 2);
  EXPECT_EQ(target_->extent().height, 180u);
}

using HeadlessContext = VulkanTest;

TEST_F(HeadlessContext, WindowTargetAsksForWindowExtensions) {
  // The fixture's context is headless: a window target must refuse with advice, not crash.
  auto target = WindowTarget::create(*renderer_, nullptr, WindowOptions{});
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.error().message.find("window_instance_extensions()"), std::string::npos)
      << target.error().message;
}

}  // namespace
}  // namespace cubeforge::engine::testing
