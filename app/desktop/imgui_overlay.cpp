// Dear ImGui over the engine's window target: see imgui_overlay.h.
#include "app/desktop/imgui_overlay.h"

#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_vulkan.h>

#include <cfloat>

namespace cubeforge::app {

namespace {

// The backend checks its own Vulkan calls through this hook; a failure there
// is a broken invariant, not a user error.
void abort_on_vulkan_error(VkResult result) {
  if (result != VK_SUCCESS) ::cubeforge::check_failed("ImGui Vulkan backend call", __FILE__, __LINE__, "VkResult");
}

// ImGui 1.86 allocates one descriptor set, for its font texture; the rest is room.
constexpr uint32_t kDescriptorSets = 16;

// ImGui's context is global, so there is one overlay; the GLFW callbacks find it here.
ImGuiOverlay* g_overlay = nullptr;

double now_ms() { return glfwGetTime() * 1000.0; }

void queue_key(GLFWwindow*, int key, int, int action, int) {
  if (!g_overlay) return;
  if (action != GLFW_REPEAT) g_overlay->input().push({InputEvent::Kind::kKey, key, action == GLFW_PRESS, 0, 0, now_ms()});
  // A held key repeats: as a press while it is down (what ImGui 1.86 counts as repeats).
  if (action == GLFW_REPEAT) {
    g_overlay->input().push({InputEvent::Kind::kKey, key, false, 0, 0, now_ms()});
    g_overlay->input().push({InputEvent::Kind::kKey, key, true, 0, 0, now_ms()});
  }
}
void queue_char(GLFWwindow*, unsigned int c) {
  if (g_overlay) g_overlay->input().push({InputEvent::Kind::kChar, static_cast<int>(c)});
}
void queue_mouse_button(GLFWwindow*, int button, int action, int) {
  if (g_overlay) g_overlay->input().push({InputEvent::Kind::kMouseButton, button, action == GLFW_PRESS});
}
void queue_cursor(GLFWwindow*, double x, double y) {
  if (g_overlay) g_overlay->input().push({InputEvent::Kind::kCursor, 0, false, x, y});
}
void queue_scroll(GLFWwindow*, double x, double y) {
  if (g_overlay) g_overlay->input().push({InputEvent::Kind::kScroll, 0, false, x, y});
}
void cursor_enter(GLFWwindow*, int entered) {
  if (g_overlay) g_overlay->input().push({InputEvent::Kind::kCursorInside, 0, entered != 0});
}
// Events that change what the window must show without being input.
void window_refresh(GLFWwindow*) {
  if (g_overlay) g_overlay->note_window_event();
}
void window_resized(GLFWwindow*, int, int) { window_refresh(nullptr); }
void window_focused(GLFWwindow*, int) { window_refresh(nullptr); }
void window_iconified(GLFWwindow*, int) { window_refresh(nullptr); }

}  // namespace

Result<std::unique_ptr<ImGuiOverlay>> ImGuiOverlay::create(engine::Context& context, engine::WindowTarget& target,
                                                           GLFWwindow* window, const std::string& ini_path) {
  std::unique_ptr<ImGuiOverlay> overlay(new ImGuiOverlay(context, target));
  VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, kDescriptorSets};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pool_info.maxSets = kDescriptorSets;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  if (vkCreateDescriptorPool(context.device(), &pool_info, nullptr, &overlay->pool_) != VK_SUCCESS)
    return make_error(ErrorCode::kOutOfMemory, "cannot create the ImGui descriptor pool");

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  overlay->imgui_context_ = true;
  overlay->ini_path_ = ini_path;
  ImGui::GetIO().IniFilename = overlay->ini_path_.empty() ? nullptr : overlay->ini_path_.c_str();
  if (!ImGui_ImplGlfw_InitForVulkan(window, false))
    return make_error(ErrorCode::kInternal, "ImGui's GLFW backend did not start");
  overlay->glfw_backend_ = true;
  overlay->window_ = window;
  g_overlay = overlay.get();
  glfwSetKeyCallback(window, queue_key);
  glfwSetCharCallback(window, queue_char);
  glfwSetMouseButtonCallback(window, queue_mouse_button);
  glfwSetCursorPosCallback(window, queue_cursor);
  glfwSetScrollCallback(window, queue_scroll);
  glfwSetCursorEnterCallback(window, cursor_enter);
  glfwSetWindowRefreshCallback(window, window_refresh);
  glfwSetFramebufferSizeCallback(window, window_resized);
  glfwSetWindowFocusCallback(window, window_focused);
  glfwSetWindowIconifyCallback(window, window_iconified);

  engine::WindowVulkanHandles handles = target.vulkan_handles();
  ImGui_ImplVulkan_InitInfo info{};
  info.Instance = handles.instance;
  info.PhysicalDevice = handles.physical_device;
  info.Device = handles.device;
  info.QueueFamily = handles.queue_family;
  info.Queue = handles.queue;
  info.DescriptorPool = overlay->pool_;
  info.MinImageCount = handles.min_image_count;
  info.ImageCount = handles.image_count;
  info.MSAASamples = handles.samples;
  info.CheckVkResultFn = abort_on_vulkan_error;
  if (!ImGui_ImplVulkan_Init(&info, handles.render_pass))
    return make_error(ErrorCode::kInternal, "ImGui's Vulkan backend did not start");
  overlay->vulkan_backend_ = true;
  overlay->min_image_count_ = handles.min_image_count;

  bool fonts = false;
  context.run_one_time([&](VkCommandBuffer cmd) { fonts = ImGui_ImplVulkan_CreateFontsTexture(cmd); });
  ImGui_ImplVulkan_DestroyFontUploadObjects();
  if (!fonts) return make_error(ErrorCode::kInternal, "cannot upload the ImGui font texture");
  return overlay;
}

ImGuiOverlay::~ImGuiOverlay() {
  context_.wait_idle();
  if (g_overlay == this) {
    g_overlay = nullptr;
    glfwSetKeyCallback(window_, nullptr);
    glfwSetCharCallback(window_, nullptr);
    glfwSetMouseButtonCallback(window_, nullptr);
    glfwSetCursorPosCallback(window_, nullptr);
    glfwSetScrollCallback(window_, nullptr);
    glfwSetCursorEnterCallback(window_, nullptr);
    glfwSetWindowRefreshCallback(window_, nullptr);
    glfwSetFramebufferSizeCallback(window_, nullptr);
    glfwSetWindowFocusCallback(window_, nullptr);
    glfwSetWindowIconifyCallback(window_, nullptr);
  }
  if (vulkan_backend_) ImGui_ImplVulkan_Shutdown();
  if (glfw_backend_) ImGui_ImplGlfw_Shutdown();
  if (imgui_context_) ImGui::DestroyContext();
  if (pool_ != VK_NULL_HANDLE) vkDestroyDescriptorPool(context_.device(), pool_, nullptr);
}

void ImGuiOverlay::new_frame() {
  window_events_ = false;
  if (target_.min_image_count() != min_image_count_) {
    min_image_count_ = target_.min_image_count();
    ImGui_ImplVulkan_SetMinImageCount(min_image_count_);
  }
  ImGui_ImplVulkan_NewFrame();
  ImGui_ImplGlfw_NewFrame();  // display size, time, cursor shape; the mouse is replaced next
  apply(input_.take_frame());
  ImGui::NewFrame();
}

void ImGuiOverlay::apply(const std::vector<InputEvent>& events) {
  ImGuiIO& io = ImGui::GetIO();
  for (const InputEvent& event : events) {
    switch (event.kind) {
      case InputEvent::Kind::kKey:
        ImGui_ImplGlfw_KeyCallback(window_, event.code, 0, event.down ? GLFW_PRESS : GLFW_RELEASE, 0);
        if (event.down && event.time_ms > 0) key_press_times_.push_back(event.time_ms);
        break;
      case InputEvent::Kind::kChar:
        io.AddInputCharacter(static_cast<unsigned int>(event.code));
        break;
      case InputEvent::Kind::kMouseButton:
        if (event.code >= 0 && event.code < 5) mouse_down_[event.code] = event.down;
        break;
      case InputEvent::Kind::kCursor:
        cursor_x_ = event.x;
        cursor_y_ = event.y;
        cursor_known_ = cursor_inside_ = true;
        break;
      case InputEvent::Kind::kCursorInside:
        cursor_inside_ = event.down;
        break;
      case InputEvent::Kind::kScroll:
        io.MouseWheelH += static_cast<float>(event.x);
        io.MouseWheel += static_cast<float>(event.y);
        break;
    }
  }
  bool any_down = false;
  for (int b = 0; b < 5; ++b) {
    io.MouseDown[b] = mouse_down_[b];
    any_down |= mouse_down_[b];
  }
  // A drag that leaves the window still follows the cursor.
  if (cursor_known_ && (cursor_inside_ || any_down)) io.MousePos = ImVec2(float(cursor_x_), float(cursor_y_));
  else io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
}

engine::OverlayRecorder ImGuiOverlay::render() {
  ImGui::Render();
  ImDrawData* draw_data = ImGui::GetDrawData();
  return [draw_data](VkCommandBuffer cmd) { ImGui_ImplVulkan_RenderDrawData(draw_data, cmd); };
}

}  // namespace cubeforge::app
