// Fixture for window tests: GLFW on the display tools/test.sh provides
// (Xvfb in CI), a context with the window system's instance extensions, and a
// 160x120 window without a client API. Skips when there is no display.
#pragma once

#include <cstdlib>
#include <memory>

#include "engine/window_target.h"
#include "vulkan_fixture.h"

namespace cubeforge::engine::testing {

class WindowRender : public VulkanTest {
 protected:
  void SetUp() override {
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
      GTEST_SKIP() << "no display (DISPLAY unset); tools/test.sh runs the suite under xvfb-run";
    // DISPLAY names a server: not reaching it is a failure, never a silent skip.
    auto started = initialise_window_system();
    ASSERT_TRUE(started.ok()) << started.error().to_string();
    glfw_initialised_ = true;
    auto extensions = window_instance_extensions();
    ASSERT_TRUE(extensions.ok()) << extensions.error().to_string();
    instance_extensions_ = *extensions;
    VulkanTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    glfwWindowHint(GLFW_CLIENT_API, GLFW_NO_API);
    window_ = glfwCreateWindow(160, 120, "cubeforge window test", nullptr, nullptr);
    ASSERT_NE(window_, nullptr);
  }
  void TearDown() override {
    target_.reset();
    renderer_.reset();
    context_.reset();
    if (window_) glfwDestroyWindow(window_);
    if (glfw_initialised_) glfwTerminate();
    VulkanTest::TearDown();
  }
  GLFWwindow* window_ = nullptr;
  bool glfw_initialised_ = false;
  std::unique_ptr<WindowTarget> target_;
};

}  // namespace cubeforge::engine::testing
