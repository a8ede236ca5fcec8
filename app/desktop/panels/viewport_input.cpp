// The 3D view's controls, for the mouse outside the panels: left drag orbits,
// right or middle drag pans, the wheel zooms; the turntable turns the camera.
// Keys outside text fields: Ctrl+Enter generates, F or Home frames the
// object, Tab hides or shows every panel.
//
// A drag starts only with a press over the view and moves the camera by the
// cursor's motion since that press: the frame of the press itself may carry
// the cursor's whole way from a panel (ImGui's MouseDelta), which is not a drag.
#include <algorithm>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

void drag_view(App& app) {
  ViewState& view = app.state.view;
  ImGuiIO& io = ImGui::GetIO();
  if (view.drag_button < 0 && !io.WantCaptureMouse) {
    for (int button : {ImGuiMouseButton_Left, ImGuiMouseButton_Right, ImGuiMouseButton_Middle}) {
      if (ImGui::IsMouseClicked(button)) {
        view.drag_button = button;
        view.drag_x = io.MousePos.x;
        view.drag_y = io.MousePos.y;
        break;
      }
    }
    return;  // the press's own frame does not move the camera
  }
  if (view.drag_button < 0) return;
  if (!ImGui::IsMouseDown(view.drag_button)) {
    view.drag_button = -1;
    return;
  }
  const float dx = io.MousePos.x - view.drag_x, dy = io.MousePos.y - view.drag_y;
  view.drag_x = io.MousePos.x;
  view.drag_y = io.MousePos.y;
  const float height = std::max(1.f, io.DisplaySize.y);
  if (view.drag_button == ImGuiMouseButton_Left) view.camera.orbit(-dx * 0.4f, dy * 0.4f);
  else view.camera.pan(-dx / height, dy / height);
}

}  // namespace

void handle_viewport_input(App& app, float frame_seconds) {
  engine::OrbitCamera& camera = app.state.view.camera;
  ImGuiIO& io = ImGui::GetIO();
  drag_view(app);
  if (!io.WantCaptureMouse && io.MouseWheel != 0.f) camera.zoom(io.MouseWheel);
  if (app.state.settings.turntable) camera.orbit(30.f * frame_seconds, 0.f);
  // Keys act anywhere but in a text field (the prompt box handles its own Ctrl+Enter).
  if (io.WantTextInput) return;
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_ENTER, false) && app.why_not_generate().empty())
    app.start_generation();
  if (!io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_F, false) || ImGui::IsKeyPressed(GLFW_KEY_HOME, false)))
    app.frame_object();
  if (!io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_TAB, false)) app.toggle_panels();
}

void update_layout(App& app) {
  LayoutState& layout = app.state.layout;
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  if (display.x != layout.width || display.y != layout.height) {
    layout.width = display.x;
    layout.height = display.y;
    layout.place_panels = true;
  }
  layout.layout = layout_panels(layout.width, layout.height, layout.panels_hidden);
  const Rect& free = layout.layout.free_view;
  engine::OrbitCamera& camera = app.state.view.camera;
  const engine::ViewRegion region{free.x / layout.width, free.y / layout.height, free.right() / layout.width,
                                  free.bottom() / layout.height};
  if (!(camera.region == region)) {
    camera.region = region;
    app.frame_object();  // the free part changed shape: fit the object to it again
  }
  layout.targets.clear();  // this frame's panels record what they show
  layout.targets["viewport"] = free;
}

}  // namespace cubeforge::app
