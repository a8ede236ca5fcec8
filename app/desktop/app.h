// The desktop app's parts in one place: its state, the generation worker, the
// viewport's engine objects, and the actions that a button, a script line or
// a key press asks for.
//
// Each frame's steps, in the main loop's order (desktop_app.cpp), each in its
// own file:
//   handle_worker_messages()  worker_messages.cpp  the worker's news -> state
//   step_script()             script_runner.cpp    the next script command
//   update_layout()           panels/viewport_input.cpp  panel places, free view
//   handle_viewport_input()   panels/viewport_input.cpp  mouse and keys on the 3D view
//   draw_panels()             panels/panels.cpp    one file per panel
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "app/desktop/app_state.h"
#include "app/desktop/core/generation_worker.h"
#include "app/desktop/desktop_app.h"
#include "app/desktop/imgui_overlay.h"
#include "engine/context.h"
#include "engine/offscreen_target.h"
#include "engine/renderer.h"
#include "engine/window_target.h"

namespace cubeforge::app {

// The engine objects behind the panels, created at start and destroyed in
// reverse at the end (desktop_app.cpp). The 3D view fills the window behind
// the ImGui panels.
struct Viewport {
  GLFWwindow* window = nullptr;
  bool glfw_ready = false;
  std::shared_ptr<engine::ValidationCounter> validation;
  std::unique_ptr<engine::Context> context;
  std::unique_ptr<engine::Renderer> renderer;
  std::unique_ptr<engine::WindowTarget> target;
  std::unique_ptr<engine::OffscreenTarget> capture;  // screenshots
  std::unique_ptr<engine::OffscreenTarget> thumbnails;  // candidates' thumbnails
  std::unique_ptr<ImGuiOverlay> imgui;
};

struct App {
  explicit App(LaunchOptions launch_options) : options(std::move(launch_options)) {}

  LaunchOptions options;
  AppState state;
  Viewport viewport;
  GenerationWorker worker;

  // --- actions ---
  // Loads `folder` with the weight format the settings choose.
  void load_model(const std::string& folder);
  // Reloads the model when the settings' weight format is not the one it was
  // loaded with and nothing runs (a format is converted as the model loads).
  void keep_model_in_chosen_weights();
  // Why Generate (and the other runs of the prompt) cannot start now, in
  // words for its tooltip; empty when it can.
  std::string why_not_generate() const;
  void start_generation();
  void start_latency_demo();
  // Times one small generation on this machine to pick the default detail
  // (core/detail_timing.h); false when a job runs or no model is loaded.
  bool calibrate_detail();
  // On a first launch, once the model is loaded and nothing runs.
  void calibrate_detail_when_due();
  // Candidates: several seeds of the prompt in a grid; pick one (shown, the
  // settings untouched); take its settings; refine it.
  void start_candidates(int count);
  void pick_candidate(int index);
  void use_candidate_settings();
  void refine_candidate();
  // The engine's render of the mesh on screen from the standard view, as a mosaic.
  Result<ThumbnailMosaic> render_thumbnail(int cells);
  Status export_current(const std::string& path);
  Status screenshot(const std::string& path);
  // Uploads the mesh to the viewport; frame_camera fits the camera to it.
  void show_mesh(const Mesh& mesh, bool frame_camera);
  // Makes `mesh` the current shape (its pieces counted, its loose pieces
  // removed if the settings say so) and shows it; a preview offered goes.
  void take_current(Mesh mesh, const std::string& prompt, uint64_t seed, bool frame_camera);
  // The current shape as the view shows it and export writes it: without its
  // loose pieces when the settings remove them.
  const Mesh& current_mesh_shown() const;
  void show_current(bool frame_camera) { show_mesh(current_mesh_shown(), frame_camera); }
  // Follows the settings' loose pieces choice (checked every frame: a click
  // or a script's `set` changes it); shows the result unless a run or an
  // offered preview has the view.
  void apply_loose_pieces_setting();
  // Remakes the current shape without its loose pieces if the settings
  // changed since it was made; true when it did.
  bool follow_loose_pieces_setting();
  // A cancelled run's preview: kept as the current shape, or put away for
  // the current shape.
  void keep_offered_preview();
  void discard_offered_preview();
  // Shows the entry's mesh; take_settings also puts back its prompt and settings.
  void restore_history(const HistoryEntry& entry, bool take_settings = true);
  // Whether restoring the entry would change the typed prompt or the settings.
  bool restore_changes_settings(const HistoryEntry& entry) const;
  void reset_camera();
  // Fits the object into the free part of the view, keeping the angles (F, Home).
  void frame_object();
  // Every panel back to its place for the window's size.
  void reset_layout() { state.layout.place_panels_next_frame = true; }
  void toggle_panels();
  void save_settings_now();
  void log(const std::string& text) { state.log.info(text); }
  // The settings' request with the prompt as it goes to the model.
  GenerationRequest request_from_settings() const;
  // Starts `request` as the Generate button does; false (and logged) when it cannot.
  bool start_generation_of(const GenerationRequest& request);
  void log_error(const std::string& text) { state.log.error(text); }
};

// --- each frame ---
// True when there were messages (what the panels show may have changed).
bool handle_worker_messages(App& app);
// Counts down `idle N`, else runs the next command once nothing runs
// (`idle`: the worker was idle when this frame began).
void step_script(App& app, float frame_ms, bool idle);
void update_layout(App& app);
void handle_viewport_input(App& app, float frame_seconds);
void draw_panels(App& app);

}  // namespace cubeforge::app
