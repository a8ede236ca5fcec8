// The 3D view's controls, for the mouse outside the panels: left drag orbits,
// right or middle drag pans, the wheel zooms; the turntable turns the camera;
// Ctrl+Enter generates from anywhere but a text field.
#include <algorithm>

#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

void handle_viewport_input(App& app, float frame_seconds) {
  engine::OrbitCamera& camera = app.state.view.camera;
  ImGuiIO& io = ImGui::GetIO();
  if (!io.WantCaptureMouse) {
    ImVec2 delta = io.MouseDelta;
    float height = std::max(1.f, io.DisplaySize.y);
    if (ImGui::IsMouseDown(ImGuiMouseButton_Left)) camera.orbit(-delta.x * 0.4f, delta.y * 0.4f);
    if (ImGui::IsMouseDown(ImGuiMouseButton_Right) || ImGui::IsMouseDown(ImGuiMouseButton_Middle))
      camera.pan(-delta.x / height, delta.y / height);
    if (io.MouseWheel != 0.f) camera.zoom(io.MouseWheel);
  }
  if (app.state.settings.turntable) camera.orbit(30.f * frame_seconds, 0.f);
  // Ctrl+Enter anywhere but in a text field (the prompt box handles its own).
  if (!ImGui::IsAnyItemActive() && io.KeyCtrl && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false) &&
      !app.worker.busy() && app.worker.has_model())
    app.start_generation();
}

}  // namespace cubeforge::app
