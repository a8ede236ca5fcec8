// The Export and view panel: export folder and file-name template, one button
// per format, the last export's outcome, the view switches (wireframe, flat,
// turntable, grid), camera reset and a screenshot of the view.
#include <filesystem>

#include "app/desktop/core/file_name_template.h"
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

// Shows the outcome in the panel and in the log.
void report(App& app, const Status& status, const std::string& what, const std::string& path) {
  ExportState& outcome = app.state.export_status;
  outcome.failed = !status.ok();
  outcome.result = status.ok() ? "wrote " + path : status.error().to_string();
  if (status.ok()) app.log(outcome.result);
  else app.log_error(what + ": " + outcome.result);
}

void draw_export_buttons(App& app) {
  AppState& state = app.state;
  AppSettings& settings = state.settings;
  ImGui::InputText("Folder", &settings.export_folder);
  ImGui::InputText("Name", &settings.export_template);
  reason_tooltip("{prompt} (slugified), {seed}, {resolution}, {date}, {time}; the extension picks the format: "
                 ".glb .obj .stl .ply");
  auto name = expand_file_name_template(
      settings.export_template, fields_now(state.current.prompt.empty() ? settings.prompt : state.current.prompt,
                                           state.current.mesh.empty() ? settings.seed : state.current.seed,
                                           settings.resolution));
  std::filesystem::path path = std::filesystem::path(settings.export_folder) / (name.ok() ? *name : "");
  for (const char* extension : {".glb", ".obj", ".stl", ".ply"}) {
    if (ImGui::Button(extension)) {
      Status status = name.ok() ? app.export_current(path.replace_extension(extension).string()) : Status(name.error());
      report(app, status, "export", path.string());
    }
    ImGui::SameLine();
  }
  ImGui::NewLine();
  const ExportState& outcome = state.export_status;
  if (!outcome.result.empty()) {
    if (outcome.failed) ImGui::TextColored(kErrorTextColour, "%s", outcome.result.c_str());
    else ImGui::TextWrapped("%s", outcome.result.c_str());
  }
}

void draw_view_switches(App& app) {
  AppState& state = app.state;
  AppSettings& settings = state.settings;
  const bool wireframe = app.viewport.renderer->supports_wireframe();
  ImGui::BeginDisabled(!wireframe);
  ImGui::Checkbox("Wireframe", &settings.wireframe);
  ImGui::EndDisabled();
  if (!wireframe) reason_tooltip("this Vulkan device has no fillModeNonSolid");
  ImGui::SameLine();
  ImGui::Checkbox("Flat", &settings.flat_shading);
  ImGui::SameLine();
  ImGui::Checkbox("Turntable", &settings.turntable);
  ImGui::Checkbox("Grid", &settings.grid);
  ImGui::SameLine();
  if (ImGui::Button("Reset camera")) app.reset_camera();
  remember_item(app, "reset-camera");
  ImGui::SameLine();
  if (ImGui::Button("Screenshot")) {
    auto shot_name = expand_file_name_template("{prompt}-{seed}-{time}.png",
                                               fields_now(state.current.prompt, state.current.seed, settings.resolution));
    std::string shot =
        (std::filesystem::path(settings.export_folder) / (shot_name.ok() ? *shot_name : "shot.png")).string();
    report(app, app.screenshot(shot), "screenshot", shot);
  }
}

}  // namespace

void draw_export_panel(App& app) {
  begin_panel(app, Panel::kExport);
  draw_export_buttons(app);
  ImGui::Separator();
  draw_view_switches(app);
  ImGui::End();
}

}  // namespace cubeforge::app
