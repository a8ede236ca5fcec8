// The script mode's steps (--script): the next command once the app is ready
// for it, the frame-time count of `idle N`, input pushed into the window's
// input queue, and `dump`, which writes what the window shows for tests to
// check. The commands are described in core/script.h.
#include <imgui.h>
#include <imgui_internal.h>  // the panels' places and content sizes for `dump`

#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/desktop/app.h"
#include "app/desktop/core/documents_folder.h"
#include "inference/core/file_io.h"

namespace cubeforge::app {

namespace {

constexpr int kLeftButton = 0, kRightButton = 1;
// A resize that the window system has not carried out after this many frames fails.
constexpr int kResizeFrames = 600;

nlohmann::json rect_json(const Rect& r) { return {{"x", r.x}, {"y", r.y}, {"width", r.width}, {"height", r.height}}; }

// What the window shows, as the tests read it.
nlohmann::json window_state(App& app) {
  AppState& state = app.state;
  nlohmann::json out;
  out["window"] = {{"width", state.layout.width}, {"height", state.layout.height}};
  out["panels_hidden"] = state.layout.panels_hidden;
  out["free_view"] = rect_json(state.layout.layout.free_view);
  nlohmann::json panels = nlohmann::json::object();
  for (int p = 0; p < kPanelCount; ++p) {
    ImGuiWindow* window = ImGui::FindWindowByName(panel_title(Panel(p)));
    if (!window || !window->WasActive) continue;
    nlohmann::json panel = rect_json({window->Pos.x, window->Pos.y, window->Size.x, window->Size.y});
    // Content wider than the room inside the panel is text or widgets cut off at its right edge.
    panel["content_width"] = window->ContentSize.x;
    panel["room_width"] = window->InnerRect.GetWidth() - 2 * window->WindowPadding.x;
    panel["collapsed"] = window->Collapsed;
    panels[panel_title(Panel(p))] = panel;
  }
  out["panels"] = panels;
  nlohmann::json targets = nlohmann::json::object();
  for (const auto& [name, rect] : state.layout.targets) targets[name] = rect_json(rect);
  out["targets"] = targets;
  out["refused"] = state.layout.refusals;
  const engine::OrbitCamera& camera = state.view.camera;
  out["camera"] = {{"yaw", camera.yaw_degrees},
                   {"pitch", camera.pitch_degrees},
                   {"distance", camera.distance},
                   {"target", {camera.target.x, camera.target.y, camera.target.z}}};
  out["prompt"] = state.settings.prompt;
  if (state.model.card) {
    const PromptCheck check = shown_prompt_check(state);
    out["prompt_check"] = {{"message", check.message},
                           {"unknown_words", check.unknown_words},
                           {"completions", complete_word(*state.model.card, state.settings.prompt)}};
  }
  out["mesh_faces"] = state.current.mesh.face_count();
  out["pieces"] = {{"count", state.current.pieces.solid_count()},
                   {"loose", count_loose_pieces(state.current.pieces, state.settings.loose_piece_fraction)},
                   {"shown_faces", app.current_mesh_shown().face_count()}};
  if (const auto& offered = state.generation.offered_preview)
    out["offered_preview"] = {{"what", offered->what}, {"faces", offered->mesh.face_count()}};
  out["export_folder"] = export_folder_or_documents(state.settings.export_folder).string();
  out["view_faces"] = state.view.shown_faces;  // the mesh on screen
  out["busy"] = app.worker.busy();
  out["preview_uploads"] = state.generation.preview_uploads;
  nlohmann::json candidates = nlohmann::json::array();
  for (const Candidate& c : state.candidates.items)
    candidates.push_back({{"seed", c.request.seed}, {"faces", c.mesh.face_count()},
                          {"thumbnail_cells", c.thumbnail.cells}});
  out["candidates"] = {{"shown", state.candidates.shown},
                       {"picked", state.candidates.picked},
                       {"items", candidates}};
  out["seed"] = state.settings.seed;
  const LatencyDemoState& demo = state.latency;
  auto spread_json = [](const Spread& s) {
    return nlohmann::json{{"samples", s.samples}, {"median", s.median}, {"min", s.min}, {"max", s.max}};
  };
  nlohmann::json latency = nlohmann::json::array();
  for (size_t i = 0; i < demo.runs.size(); ++i) {
    const worker_message::LatencyResult* result = demo.last(i);
    nlohmann::json repeats = nlohmann::json::array();
    for (const auto& m : demo.measured[i]) repeats.push_back(m.repeat);
    latency.push_back({{"name", demo.runs[i].name},
                       {"available", demo.runs[i].unavailable_reason.empty()},
                       {"done", result != nullptr},
                       {"not_run", demo.not_run[i]},
                       {"baseline", demo.runs[i].baseline},
                       {"repeats", repeats},
                       {"tpot", spread_json(demo.tpot_ms(i))},
                       {"object", spread_json(demo.object_ms(i))},
                       {"tpot_text", demo.bar_text(i, true)},
                       {"object_text", demo.bar_text(i, false)},
                       {"tpot_ms", demo.tpot_ms(i).median},
                       {"total_ms", demo.object_ms(i).median},
                       {"model_evaluations", result ? result->decoding.model_evaluations : 0},
                       {"tokens_per_evaluation", result ? result->decoding.tokens_per_evaluation() : 0.0},
                       {"decoding", decoding_mode_name(demo.runs[i].decoding.mode)},
                       {"weights", result ? result->weights : ""},
                       {"model", result ? result->model : ""},
                       {"kv_cache", result ? result->kv_cache : ""},
                       {"token_steps", result ? result->token_steps : std::vector<int>{}}});
  }
  out["latency"] = {{"shown", demo.shown},
                    {"running", demo.running},
                    {"decoding", state.settings.latency_decoding},
                    {"diffusion_threshold", state.settings.diffusion_threshold},
                    {"repeats", demo.repeats},
                    {"wall_ms", demo.wall_ms ? *demo.wall_ms : -1.0},
                    {"runs", latency}};
  if (demo.meshed)
    out["latency"]["meshed"] = {{"run", demo.meshed->index},
                                {"resolution", demo.meshed->resolution},
                                {"faces", demo.meshed->faces},
                                {"ms", demo.meshed->ms},
                                {"problem", demo.meshed->problem}};
  // The view's content against its room: wider content is cut off at its right edge.
  if (ImGuiWindow* view = ImGui::FindWindowByName(kLatencyViewTitle); view && view->WasActive)
    out["latency"]["view"] = {{"content_width", view->ContentSize.x},
                              {"room_width", view->InnerRect.GetWidth() - 2 * view->WindowPadding.x}};
  out["rest"] = {{"wakeups", state.script.rest_wakeups}, {"frames", state.script.rest_frames}};
  out["current_seed"] = state.current.seed;
  const HistoryState& history = state.history;
  out["history"] = {{"entries", history.store ? history.store->entries().size() : 0},
                    {"problem", history.problem},
                    {"problems", history.store ? history.store->problems() : std::vector<std::string>{}},
                    {"pending_restore", history.pending_restore.has_value()}};
  const ExportState& exported = state.export_status;
  out["export"] = {{"result", exported.result},
                   {"failed", exported.failed},
                   {"pending", !exported.pending                 ? ""
                               : exported.pending->folder_missing ? "create-folder"
                                                                  : "replace"}};
  GenerationState& generation = state.generation;
  GenerationProgress& progress = generation.progress;
  const double elapsed_ms = ms_between(generation.run_started, Clock::now());
  const char* outcomes[] = {"running", "done", "cancelled", "failed"};
  nlohmann::json stages = nlohmann::json::object();
  for (int s = 0; s < kAppStageCount; ++s) {
    const AppStage stage = AppStage(s);
    std::string shown = progress.stage_ms()[s] ? "done" : "-";
    if (progress.current_stage() == stage) shown = "running";
    else if (!progress.stage_ms()[s] && progress.stopped_stage() == stage) shown = outcomes[int(progress.outcome())];
    stages[app_stage_name(stage)] = shown;
  }
  out["run"] = {{"status", progress.status(elapsed_ms)},
                {"outcome", outcomes[int(progress.outcome())]},
                {"fraction", progress.fraction(elapsed_ms)},
                {"stages", stages},
                {"first_mesh_ms", generation.first_mesh_ms ? *generation.first_mesh_ms : -1.0},
                {"weights", generation.weights},
                {"kv_cache", generation.kv_cache},
                {"tokens", progress.token_slots()}};
  if (const auto summary = app.worker.model_summary())
    out["model"] = {{"folder", summary->folder},
                    {"weights", weight_format_name(summary->weights)},
                    {"kv_bases_rank", summary->kv_bases_rank}};
  out["settings"] = settings_to_json(state.settings);
  nlohmann::json errors = nlohmann::json::array();
  for (const LogLine& line : state.log.lines)
    if (line.error) errors.push_back(line.text);
  out["errors"] = errors;
  out["error_popup"] = state.log.popup_messages;
  out["error_popup_view"] = {{"open", state.log.popup_open},
                             {"scroll", state.log.popup_scroll},
                             {"scroll_max", state.log.popup_scroll_max}};
  out["model_status"] = state.model.status;
  out["texts"] = state.layout.texts;
  return out;
}

ImVec2 point_of(App& app, const ScriptCommand& command, bool& found) {
  found = true;
  if (command.target.empty()) return ImVec2(command.x, command.y);
  auto target = app.state.layout.targets.find(command.target);
  if (target == app.state.layout.targets.end()) {
    found = false;
    return ImVec2();
  }
  const Rect& r = target->second;
  return ImVec2(r.x + r.width / 2, r.y + r.height / 2);
}

// Pushes a command's input events, all at once.
void push_input(App& app, const ScriptCommand& command, const std::string& where) {
  InputQueue& input = app.viewport.imgui->input();
  using K = ScriptCommand::Kind;
  auto cursor = [&](float x, float y) { input.push({InputEvent::Kind::kCursor, 0, false, x, y}); };
  auto button = [&](int b, bool down) { input.push({InputEvent::Kind::kMouseButton, b, down}); };
  switch (command.kind) {
    case K::kClick:
    case K::kDrag:
    case K::kDragRight: {
      bool found = false;
      ImVec2 at = point_of(app, command, found);
      if (!found) {
        app.log_error(where + "no widget named '" + command.target + "' in the window");
        return;
      }
      const int b = command.kind == K::kDragRight ? kRightButton : kLeftButton;
      cursor(at.x, at.y);
      button(b, true);
      // A drag moves in steps, as a hand does.
      constexpr int kSteps = 4;
      for (int step = 1; command.kind != K::kClick && step <= kSteps; ++step)
        cursor(at.x + command.dx * step / kSteps, at.y + command.dy * step / kSteps);
      button(b, false);
      break;
    }
    case K::kKey:
      for (int key : command.keys) input.push({InputEvent::Kind::kKey, key, true});
      for (auto key = command.keys.rbegin(); key != command.keys.rend(); ++key)
        input.push({InputEvent::Kind::kKey, *key, false});
      break;
    case K::kType:
      for (unsigned char c : command.argument) input.push({InputEvent::Kind::kChar, c});
      break;
    default:
      break;
  }
}

void run_command(App& app, const ScriptCommand& command) {
  AppState& state = app.state;
  const std::string where = "script line " + std::to_string(command.line) + ": ";
  switch (command.kind) {
    case ScriptCommand::Kind::kModel: {
      std::filesystem::path folder = command.argument;
      if (folder.is_relative()) folder = std::filesystem::path(app.options.script).parent_path() / folder;
      app.load_model(folder.lexically_normal().string());
      break;
    }
    case ScriptCommand::Kind::kPrompt:
      state.settings.prompt = command.argument;
      break;
    case ScriptCommand::Kind::kSet: {
      size_t space = command.argument.find_first_of(" \t");
      std::string key = command.argument.substr(0, space);
      std::string value = command.argument.substr(command.argument.find_first_not_of(" \t", space));
      Status set = set_setting(state.settings, key, value);
      if (!set.ok()) app.log_error(where + set.error().message);
      break;
    }
    case ScriptCommand::Kind::kGenerate:
      app.start_generation();
      break;
    case ScriptCommand::Kind::kLatency:
      app.start_latency_demo();
      break;
    case ScriptCommand::Kind::kCancel:
      app.worker.cancel();
      break;
    case ScriptCommand::Kind::kWait:
      break;
    case ScriptCommand::Kind::kIdle:
      state.script.idle_frames_left = std::stoi(command.argument);
      state.script.idle_frame_ms.clear();
      break;
    case ScriptCommand::Kind::kCalibrate:
      if (!app.calibrate_detail()) app.log_error(where + "calibrate: no model is loaded");
      break;
    case ScriptCommand::Kind::kRest:  // counted by the main loop
      state.script.rest_wakeups_left = std::stoi(command.argument);
      state.script.rest_wakeups = state.script.rest_frames = 0;
      break;
    case ScriptCommand::Kind::kExport: {
      Status exported = app.export_current(command.argument);
      if (exported.ok()) app.log("exported " + command.argument);
      else app.log_error(where + "export: " + exported.error().to_string());
      break;
    }
    case ScriptCommand::Kind::kScreenshot: {
      Status shot = app.screenshot(command.argument);
      if (shot.ok()) app.log("screenshot " + command.argument);
      else app.log_error(where + "screenshot: " + shot.error().to_string());
      break;
    }
    case ScriptCommand::Kind::kQuit:
      state.quit = true;
      break;
    case ScriptCommand::Kind::kClick:
    case ScriptCommand::Kind::kDrag:
    case ScriptCommand::Kind::kDragRight:
    case ScriptCommand::Kind::kKey:
    case ScriptCommand::Kind::kType:
      push_input(app, command, where);
      break;
    case ScriptCommand::Kind::kResize:
      glfwSetWindowSize(app.viewport.window, command.width, command.height);
      state.script.resize_to = {command.width, command.height};
      state.script.resize_frames_left = kResizeFrames;
      break;
    case ScriptCommand::Kind::kResetLayout:
      app.reset_layout();
      break;
    case ScriptCommand::Kind::kErrorPopup:
      state.log.popup_in_scripts = true;
      break;
    case ScriptCommand::Kind::kWaitPreview:
      break;  // step_script holds the next command until a preview shows
    case ScriptCommand::Kind::kHoldPreviews:
      app.worker.hold_after_previews(true);
      break;
    case ScriptCommand::Kind::kDump: {
      Status written = write_file_atomically(command.argument, window_state(app).dump(1) + "\n");
      if (!written.ok()) app.log_error(where + "dump: " + written.error().to_string());
      break;
    }
  }
}

// True while the last command's effect is still under way: input not yet
// handed over (and the frames after it, for the panels to act on it), or a
// resize the window has not reached.
bool still_settling(App& app) {
  ScriptState& script = app.state.script;
  if (!app.viewport.imgui->input().empty()) {
    script.settle_frames = 2;
    return true;
  }
  if (script.settle_frames > 0) {
    --script.settle_frames;
    return true;
  }
  if (script.resize_frames_left > 0) {
    const VkExtent2D extent = app.viewport.target->extent();
    const ImVec2 display = ImGui::GetIO().DisplaySize;
    const bool reached = int(extent.width) == script.resize_to[0] && int(extent.height) == script.resize_to[1] &&
                         int(display.x) == script.resize_to[0] && int(display.y) == script.resize_to[1];
    if (reached) {
      script.resize_frames_left = 0;
      script.settle_frames = 2;  // the layout and the camera follow in the next frame
      return true;
    }
    if (--script.resize_frames_left == 0)
      app.log_error("the window did not reach " + std::to_string(script.resize_to[0]) + "x" +
                    std::to_string(script.resize_to[1]) + " pixels");
    return true;
  }
  return false;
}

}  // namespace

void step_script(App& app, float frame_ms, bool idle) {
  AppState& state = app.state;
  ScriptState& script = state.script;
  if (script.rest_wakeups_left > 0) return;  // the main loop counts a rest's wakeups
  if (script.idle_frames_left > 0) {
    script.idle_frame_ms.push_back(frame_ms);
    if (--script.idle_frames_left == 0) {
      FrameTimeSummary s = summarise(script.idle_frame_ms);
      char line[200];
      std::snprintf(line, sizeof line, "frame times while idle: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d frames)",
                    s.mean_ms, s.p95_ms, s.max_ms, s.frames);
      app.log(line);
    }
    return;
  }
  if (!state.script_mode || still_settling(app)) return;
  if (script.next >= script.commands.size()) {
    if (idle) state.quit = true;
    return;
  }
  const ScriptCommand& command = script.commands[script.next];
  if (command.waits_for_idle() && !idle) return;
  // `wait-preview`: done once the run shows a preview; a run that ends
  // without one is an error, not a wait for ever.
  if (command.kind == ScriptCommand::Kind::kWaitPreview && state.generation.preview_uploads == 0) {
    if (!idle || state.generation.generating) return;
    app.log_error("script line " + std::to_string(command.line) + ": wait-preview: the run showed no preview");
  }
  ++script.next;
  run_command(app, command);
}

}  // namespace cubeforge::app
