// Window render target: a GLFW window's surface and swapchain.
//
// The swapchain is rebuilt when the window's framebuffer size changes or
// presentation reports VK_ERROR_OUT_OF_DATE_KHR / VK_SUBOPTIMAL_KHR; while the
// window is minimised (zero-sized framebuffer) frames are skipped, not drawn.
// Main loop order, as in Dear ImGui's example_glfw_vulkan: poll events ->
// draw_frame (rebuild if flagged, skip while minimised, record scene + overlay,
// submit, present).
//
// For the ImGui Vulkan backend: imgui_init_info() fills the handles it needs
// (instance, device, queue, min/actual image count, MSAA samples), and
// render_pass() is the pass to pass to ImGui_ImplVulkan_Init. The overlay
// recorder of draw_frame() runs inside that pass after the scene, so
// ImGui_ImplVulkan_RenderDrawData goes there. After a rebuild,
// min_image_count() is what ImGui_ImplVulkan_SetMinImageCount wants.
#pragma once

#include <vulkan/vulkan.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/renderer.h"

namespace cubeforge::engine {

// Starts GLFW; when it cannot reach the display, the error carries GLFW's own
// description (which display, and why) so a failure under load can be told
// apart from a missing DISPLAY.
Status initialise_window_system();

// Instance extensions GLFW needs for window surfaces (call after
// initialise_window_system).
Result<std::vector<std::string>> window_instance_extensions();

enum class FrameStatus {
  kPresented,
  kMinimised,  // nothing drawn: the window has no area
  kSkipped,    // the swapchain went out of date while acquiring; rebuilt for the next frame
};

// The subset of ImGui_ImplVulkan_InitInfo the engine knows (the app adds its
// own descriptor pool and pipeline cache).
struct WindowVulkanHandles {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  uint32_t queue_family;
  VkQueue queue;
  uint32_t min_image_count;
  uint32_t image_count;
  VkSampleCountFlagBits samples;
  VkRenderPass render_pass;
};

struct WindowOptions {
  bool vsync = true;  // FIFO; otherwise MAILBOX or IMMEDIATE when offered
  VkSampleCountFlagBits samples = static_cast<VkSampleCountFlagBits>(0);  // 0: 4x when supported
};

class WindowTarget {
 public:
  static Result<std::unique_ptr<WindowTarget>> create(Renderer& renderer, GLFWwindow* window,
                                                      const WindowOptions& options);
  ~WindowTarget();
  WindowTarget(const WindowTarget&) = delete;
  WindowTarget& operator=(const WindowTarget&) = delete;

  Result<FrameStatus> draw_frame(const OrbitCamera& camera, const SceneSettings& settings,
                                 const OverlayRecorder& overlay = {});

  WindowVulkanHandles vulkan_handles() const;
  VkRenderPass render_pass() const { return render_pass_; }
  VkExtent2D extent() const { return extent_; }
  VkFormat color_format() const { return format_.format; }
  VkSampleCountFlagBits samples() const { return samples_; }
  uint32_t image_count() const { return static_cast<uint32_t>(images_.size()); }
  uint32_t min_image_count() const { return min_image_count_; }
  int swapchain_builds() const { return swapchain_builds_; }  // 1 after creation, +1 per rebuild

 private:
  WindowTarget(Renderer& renderer, GLFWwindow* window)
      : renderer_(renderer), context_(renderer.context()), window_(window) {}
  // Returns false (and builds nothing) while the window is minimised.
  Result<bool> build_swapchain();
  void destroy_swapchain_resources();

  Renderer& renderer_;
  Context& context_;
  GLFWwindow* window_;
  WindowOptions options_;
  VkSurfaceKHR surface_ = VK_NULL_HANDLE;
  VkSwapchainKHR swapchain_ = VK_NULL_HANDLE;
  VkSurfaceFormatKHR format_{};
  VkPresentModeKHR present_mode_ = VK_PRESENT_MODE_FIFO_KHR;
  VkSampleCountFlagBits samples_ = VK_SAMPLE_COUNT_1_BIT;
  VkRenderPass render_pass_ = VK_NULL_HANDLE;
  VkExtent2D extent_{};
  uint32_t min_image_count_ = 2;
  std::vector<VkImage> images_;
  std::vector<VkImageView> image_views_;
  std::vector<VkFramebuffer> framebuffers_;
  std::vector<VkSemaphore> render_finished_;  // one per swapchain image
  Image multisampled_;
  Image depth_;
  bool rebuild_needed_ = false;
  int swapchain_builds_ = 0;
};

}  // namespace cubeforge::engine
