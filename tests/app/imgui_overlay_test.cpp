// The hooks the desktop app needs, exercised with Debian's Dear ImGui 1.86
// (glfw + vulkan backends from libimgui.a) through the app's own ImGuiOverlay:
// ImGui initialised from the window target's handles and render pass, fonts
// uploaded with a one-time command buffer, ImGui drawn through the overlay
// recorder, and the offscreen viewport shown in an ImGui panel through a
// SampledImage descriptor set. Passes when every frame presents and the
// validation layer stays silent (it checks, at submission, that the sampled
// viewport image is in the layout ImGui reads).
#include <gtest/gtest.h>

#include <imgui.h>

#include "app/desktop/imgui_overlay.h"
#include "engine/sampled_image.h"
#include "tests/engine/analytic_shapes.h"
#include "tests/engine/window_fixture.h"

namespace cubeforge::engine::testing {
namespace {

TEST_F(WindowRender, ImGuiDrawsOverTheSceneAndShowsTheOffscreenViewport) {
  WindowOptions options;
  options.vsync = false;
  auto target = WindowTarget::create(*renderer_, window_, options);
  ASSERT_TRUE(target.ok()) << target.error().to_string();
  target_ = std::move(target).value();
  ASSERT_TRUE(renderer_->meshes().upload(make_torus(0.6f, 0.2f, 48, 16)).ok());

  // The panel's viewport: an offscreen target sampled by ImGui.
  auto panel = make_offscreen(96, 64);
  ASSERT_TRUE(panel);
  auto panel_texture = SampledImage::create(*context_, panel->color_view());
  ASSERT_TRUE(panel_texture.ok()) << panel_texture.error().to_string();

  auto imgui = app::ImGuiOverlay::create(*context_, *target_, window_);
  ASSERT_TRUE(imgui.ok()) << imgui.error().to_string();

  OrbitCamera camera;
  camera.pitch_degrees = 30.f;
  camera.frame(renderer_->mesh_bounds(), 160.f / 120.f);
  int presented = 0, frames_with_vertices = 0;
  for (int frame = 0; frame < 4; ++frame) {
    glfwPollEvents();
    EXPECT_TRUE(panel->render(camera, SceneSettings{}).ok());
    (*imgui)->new_frame();
    ImGui::SetNextWindowPos(ImVec2(4, 4));
    ImGui::Begin("Viewport");
    ImGui::Image(reinterpret_cast<ImTextureID>((*panel_texture)->descriptor_set()), ImVec2(96, 64));
    ImGui::Text("frame %d", frame);
    ImGui::End();
    OverlayRecorder overlay = (*imgui)->render();
    frames_with_vertices += ImGui::GetDrawData()->TotalVtxCount > 0;
    auto status = target_->draw_frame(camera, SceneSettings{}, overlay);
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    presented += status.ok() && *status == FrameStatus::kPresented;
  }
  EXPECT_EQ(presented, 4);
  // ImGui lays a new window out during its first frame and draws it from the second.
  EXPECT_GE(frames_with_vertices, 3);

  imgui.value().reset();  // waits for the device, then shuts ImGui down
  panel_texture.value().reset();
  panel.reset();
}

}  // namespace
}  // namespace cubeforge::engine::testing
