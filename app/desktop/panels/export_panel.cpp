// The Export and view panel: the view switches (wireframe, flat, turntable,
// grid, frame, reset camera, screenshot) first, then the export: folder (the
// documents folder until one is chosen) and file-name template, one button
// per format and the desktop's Save-as dialog.
// Before writing, a missing folder is offered for creation and an existing
// file is only replaced when the person says so; the outcome names the file
// by its absolute path.
#include <filesystem>

#include "app/desktop/core/documents_folder.h"
#include "app/desktop/core/file_name_template.h"
#include "app/desktop/panels/panels.h"

namespace cubeforge::app {

namespace {

constexpr const char* kConfirmPopup = "Export";

// Shows the outcome in the panel and in the log.
void report(App& app, const Status& status, const std::string& what, const std::string& path) {
  ExportState& outcome = app.state.export_status;
  outcome.failed = !status.ok();
  outcome.result = status.ok() ? "wrote " + path : what + " failed: " + status.error().to_string();
  if (status.ok()) app.log(outcome.result);
  else app.log_error(outcome.result);
}

void write_export(App& app, const ExportTarget& target) {
  if (target.folder_missing) {
    std::error_code ec;
    std::filesystem::create_directories(target.path.parent_path(), ec);
    if (ec) {
      report(app, make_error(ErrorCode::kIo, "cannot create the folder '" + target.path.parent_path().string() +
                                                 "': " + ec.message()),
             "export", target.path.string());
      return;
    }
  }
  Status status = app.state.current.mesh.empty()
                      ? make_error(ErrorCode::kInvalidArgument, "nothing to export yet: generate a shape first")
                      : export_mesh(app.current_mesh_shown(), target.path, target.format);
  report(app, status, "export", target.path.string());
}

// Writes at once, or asks first when the folder is missing or the file exists.
void export_to(App& app, const Result<ExportTarget>& target) {
  if (!target.ok()) {
    report(app, target.error(), "export", "");
    return;
  }
  // The documents folder, chosen by the app, is made without asking; a
  // folder the person typed is offered for creation (it may be a typo).
  const bool documents =
      app.state.settings.export_folder.empty() && target->path.parent_path() == documents_folder().lexically_normal();
  if ((!target->folder_missing || documents) && !target->exists) {
    write_export(app, *target);
    return;
  }
  app.state.export_status.pending = *target;
  app.state.export_status.open_confirmation = true;
}

void draw_confirmation(App& app) {
  ExportState& status = app.state.export_status;
  if (status.open_confirmation) {
    ImGui::OpenPopup(kConfirmPopup);
    status.open_confirmation = false;
  }
  if (!ImGui::BeginPopupModal(kConfirmPopup, nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  if (!status.pending) {
    ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
    return;
  }
  const ExportTarget& target = *status.pending;
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30);
  if (target.folder_missing)
    ImGui::TextWrapped("The folder %s does not exist. Create it and export there?",
                       target.path.parent_path().c_str());
  else
    ImGui::TextWrapped("%s already exists. Replace it?", target.path.c_str());
  ImGui::PopTextWrapPos();
  if (ImGui::Button(target.folder_missing ? "Create folder and export" : "Replace")) {
    write_export(app, target);
    status.pending.reset();
    ImGui::CloseCurrentPopup();
  }
  remember_item(app, "confirm-export");
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
    app.log("export cancelled: " + target.path.string() + " left as it was");
    status.pending.reset();
    ImGui::CloseCurrentPopup();
  }
  remember_item(app, "cancel-export");
  ImGui::EndPopup();
}

void draw_export_buttons(App& app) {
  AppState& state = app.state;
  AppSettings& settings = state.settings;
  ImGui::PushItemWidth(-(ImGui::CalcTextSize("Folder").x + ImGui::GetStyle().ItemInnerSpacing.x));
  // None chosen: the documents folder, shown as its path; typing keeps what is typed.
  const std::filesystem::path folder = export_folder_or_documents(settings.export_folder);
  std::string field = settings.export_folder.empty() ? folder.string() : settings.export_folder;
  if (ImGui::InputText("Folder", &field)) settings.export_folder = field;
  remember_item(app, "export-folder");
  reason_tooltip("~ is your home folder; a folder that does not exist is offered for creation. Empty: your "
                 "documents folder");
  // The field shows the path; this says whose folder it is.
  if (settings.export_folder.empty()) ImGui::TextDisabled("Your documents folder");
  remember_text(app, "export-folder",
                folder.string() + (settings.export_folder.empty() ? " (your documents folder)" : ""));
  ImGui::InputText("Name", &settings.export_template);
  reason_tooltip("{prompt} (slugified), {seed}, {resolution}, {date}, {time}; the extension picks the format "
                 "(.glb .obj .stl .ply), or a format button below sets it");
  ImGui::PopItemWidth();
  auto name = expand_file_name_template(
      settings.export_template, fields_now(state.current.prompt.empty() ? settings.prompt : state.current.prompt,
                                           state.current.mesh.empty() ? settings.seed : state.current.seed,
                                           settings.resolution));
  ImGui::BeginDisabled(state.current.mesh.empty());
  bool first = true;
  for (const char* extension : {".glb", ".obj", ".stl", ".ply"}) {
    if (!first) flow_next(button_width(extension));
    first = false;
    if (ImGui::Button(extension))
      export_to(app, name.ok() ? plan_export(settings.export_folder, *name, extension) : Result<ExportTarget>(name.error()));
    remember_item(app, std::string("export-") + (extension + 1));
  }
  ImGui::EndDisabled();
  flow_next(button_width("Save as..."));
  const std::string no_dialog = SaveDialog::unavailable_reason();
  ImGui::BeginDisabled(state.current.mesh.empty() || !no_dialog.empty() || state.export_status.dialog.is_open());
  if (ImGui::Button("Save as...") && name.ok()) {
    auto suggested = plan_export(settings.export_folder, *name);
    state.export_status.dialog.start(suggested.ok() ? suggested->path : std::filesystem::path(*name));
  }
  ImGui::EndDisabled();
  reason_tooltip(no_dialog.empty() ? "Choose the file in your desktop's dialog" : no_dialog);
  if (state.current.mesh.empty()) reason_tooltip("generate a shape first");
  if (auto chosen = state.export_status.dialog.take_result(); chosen && !chosen->empty()) {
    const std::filesystem::path path = *chosen;
    // The folder chosen in the dialog is where the next export goes too.
    settings.export_folder = path.parent_path().string();
    export_to(app, plan_export(path.parent_path().string(), path.filename().string()));
  }
  const ExportState& outcome = state.export_status;
  if (!outcome.result.empty()) {
    if (outcome.failed) ImGui::PushStyleColor(ImGuiCol_Text, kErrorTextColour);
    ImGui::TextWrapped("%s", outcome.result.c_str());
    if (outcome.failed) ImGui::PopStyleColor();
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
  flow_next(checkbox_width("Flat"));
  ImGui::Checkbox("Flat", &settings.flat_shading);
  flow_next(checkbox_width("Grid"));
  ImGui::Checkbox("Grid", &settings.grid);
  flow_next(checkbox_width("Turntable"));
  ImGui::Checkbox("Turntable", &settings.turntable);
  flow_next(button_width("Frame"));
  if (ImGui::Button("Frame")) app.frame_object();
  reason_tooltip("Fit the object in the view (F or Home); Tab hides the panels");
  flow_next(button_width("Reset camera"));
  if (ImGui::Button("Reset camera")) app.reset_camera();
  remember_item(app, "reset-camera");
  flow_next(button_width("Screenshot"));
  if (ImGui::Button("Screenshot")) {
    auto shot_name = expand_file_name_template("{prompt}-{seed}-{time}.png",
                                               fields_now(state.current.prompt, state.current.seed, settings.resolution));
    std::error_code ec;
    const std::filesystem::path shot = std::filesystem::absolute(
        export_folder_or_documents(settings.export_folder) / (shot_name.ok() ? *shot_name : "shot.png"), ec);
    std::filesystem::create_directories(shot.parent_path(), ec);
    report(app, app.screenshot(shot.string()), "screenshot", shot.string());
  }
  flow_next(button_width("Reset layout"));
  if (ImGui::Button("Reset layout")) app.reset_layout();
  remember_item(app, "reset-layout");
  reason_tooltip("Every panel back to its place");
}

}  // namespace

void draw_export_panel(App& app) {
  begin_panel(app, Panel::kExport);
  draw_view_switches(app);
  ImGui::Separator();
  draw_export_buttons(app);
  draw_confirmation(app);
  ImGui::End();
}

}  // namespace cubeforge::app
