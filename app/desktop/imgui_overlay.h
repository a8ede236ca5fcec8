// Dear ImGui drawn over the engine's window target: Debian's ImGui 1.86 with
// its GLFW and Vulkan backends, set up from the handles and render pass the
// window target gives (its descriptor pool, the backends' init, the font
// texture uploaded with a one-time command buffer) and torn down in reverse.
//
// One per process (ImGui's context is global). The app and the engine's
// ImGui test both use it, so the test checks the setup the app runs.
//
// Per frame: new_frame() -> ImGui calls -> render(), whose recorder goes to
// WindowTarget::draw_frame() as the overlay (drawn inside the window's render
// pass, after the scene).
//
// Input: the window's keyboard and mouse callbacks are ours, not the GLFW
// backend's. They queue every event (core/input_queue.h) and new_frame()
// hands ImGui one frame's share, so no key press or click is lost however
// long a frame takes; input() lets a script push the same events.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/desktop/core/input_queue.h"
#include "engine/context.h"
#include "engine/window_target.h"
#include "inference/core/result.h"

namespace cubeforge::app {

class ImGuiOverlay {
 public:
  // ini_path: where ImGui keeps the window layout; empty: nowhere.
  static Result<std::unique_ptr<ImGuiOverlay>> create(engine::Context& context, engine::WindowTarget& target,
                                                       GLFWwindow* window, const std::string& ini_path = {});
  ~ImGuiOverlay();  // waits for the device, then shuts the backends down
  ImGuiOverlay(const ImGuiOverlay&) = delete;
  ImGuiOverlay& operator=(const ImGuiOverlay&) = delete;

  // Starts an ImGui frame; after a swapchain rebuild changed the minimum
  // image count, tells the Vulkan backend first.
  void new_frame();
  // Ends the ImGui frame; the recorder draws it into draw_frame's render pass.
  engine::OverlayRecorder render();

  // Events not yet handed to ImGui; a script pushes its input here too.
  InputQueue& input() { return input_; }
  // When the key presses handed to ImGui since the last call were delivered
  // (glfwGetTime, ms), to measure how long a press takes to reach the screen.
  std::vector<double> take_key_press_times() { return std::exchange(key_press_times_, {}); }
  // Whether the window was resized, exposed, focused or iconified since the
  // last frame began: an app that draws only when something changed redraws
  // then. new_frame() clears it.
  bool window_events() const { return window_events_; }
  void note_window_event() { window_events_ = true; }

 private:
  ImGuiOverlay(engine::Context& context, engine::WindowTarget& target) : context_(context), target_(target) {}

  engine::Context& context_;
  engine::WindowTarget& target_;
  std::string ini_path_;  // ImGui keeps a pointer to it
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  bool imgui_context_ = false, glfw_backend_ = false, vulkan_backend_ = false;
  uint32_t min_image_count_ = 0;

  // The mouse as the events handed over so far leave it.
  void apply(const std::vector<InputEvent>& events);
  InputQueue input_;
  GLFWwindow* window_ = nullptr;
  bool cursor_known_ = false, cursor_inside_ = true;
  double cursor_x_ = 0, cursor_y_ = 0;
  bool mouse_down_[5] = {};
  std::vector<double> key_press_times_;
  bool window_events_ = false;
};

}  // namespace cubeforge::app
