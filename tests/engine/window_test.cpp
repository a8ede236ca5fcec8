// A GLFW window (under Xvfb in CI) renders, resizes and rebuilds its
// swapchain; the overlay hook records inside the window's render pass.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "analytic_shapes.h"
#include "window_fixture.h"

namespace cubeforge::engine::testing {
namespace {

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
