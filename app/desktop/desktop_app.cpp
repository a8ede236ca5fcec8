// The desktop app's start, main loop and shutdown: see desktop_app.h. What the
// app knows is in app_state.h, what it can do in app.h, the panels in panels/.
//
// Main loop in Dear ImGui's order: wait for events (core/redraw_schedule.h:
// an idle app sleeps until input, the worker's news or a repaint) -> drain
// the worker's messages -> draw only if something changed -> next script
// command -> reload the model if the weight format changed ->
// new frame (this frame's share of the queued input) -> layout -> viewport
// mouse and keys -> panels -> render -> draw_frame (rebuild the swapchain if
// flagged, skip while minimised, scene + ImGui overlay, present). Everything
// here runs on the UI thread; only GenerationWorker's job runs elsewhere.
#include "app/desktop/desktop_app.h"

#include <imgui.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "app/desktop/app.h"
#include "app/desktop/core/data_folder.h"
#include "app/desktop/core/detail_timing.h"
#include "app/desktop/core/redraw_schedule.h"
#include "inference/core/untrusted_text.h"
#include "inference/pipeline/cube_model.h"

namespace cubeforge::app {

namespace {

// Script runs have no vsync; their frames are paced as a 60 Hz display would.
constexpr double kFramePeriodMs = 1000.0 / 60.0;
// How often a script's `rest` wakes the idle loop to count it.
constexpr double kScriptRestWakeupSeconds = 0.02;

// The data folder (log file, settings) and the script; false when the script
// cannot be read.
bool load_state(App& app) {
  AppState& state = app.state;
  const LaunchOptions& options = app.options;
  state.script_mode = !options.script.empty();
  state.data_folder = resolve_data_folder(options.data_folder);
  std::error_code ec;
  std::filesystem::create_directories(state.data_folder, ec);
  // The previous run's log stays beside the new one.
  const auto log_path = state.data_folder / "cubeforge.log";
  if (std::filesystem::exists(log_path, ec)) std::filesystem::rename(log_path, state.data_folder / "cubeforge.log.1", ec);
  Status log_usable = check_data_file(log_path);
  if (log_usable.ok()) state.log.file.open(log_path, std::ios::trunc);
  if (!state.log.file)
    std::fprintf(stderr, "cubeforge: cannot write the log in '%s'%s\n", escape_untrusted(state.data_folder.string()).c_str(),
                 log_usable.ok() ? "" : (": " + log_usable.error().to_string()).c_str());

  auto settings = load_settings(state.data_folder / "settings.json");
  if (settings.ok()) state.settings = *settings;
  else app.log_error(settings.error().to_string() + " (starting from the defaults)");
  // Until the person chooses a detail it follows this machine's measured speed.
  if (!state.settings.resolution_chosen && state.settings.detail_calibration_ms > 0)
    state.settings.resolution = default_detail(state.settings.detail_calibration_ms);
  if (!options.prompt.empty()) state.settings.prompt = options.prompt;

  if (state.script_mode) {
    auto script = load_script(options.script);
    if (!script.ok()) {
      app.log_error(script.error().to_string());
      return false;
    }
    state.script.commands = std::move(*script);
  }
  return true;
}

bool start_window_and_engine(App& app) {
  Viewport& viewport = app.viewport;
  const bool script_mode = app.state.script_mode;
  if (auto started = engine::initialise_window_system(); !started.ok()) {
    app.log_error("cannot open a window: " + started.error().to_string() +
                  ". Use cubeforge-cli for generation without a display.");
    return false;
  }
  viewport.glfw_ready = true;
  auto extensions = engine::window_instance_extensions();
  if (!extensions.ok()) {
    app.log_error("no Vulkan window support: " + extensions.error().to_string());
    return false;
  }
  engine::ContextOptions context_options;
  context_options.application_name = "cubeforge";
  viewport.validation = std::make_shared<engine::ValidationCounter>();
  context_options.validation_counter = viewport.validation;
  // Script runs (the tests) check that the validation layer stays silent.
  context_options.validation = script_mode ? engine::Validation::kIfAvailable : engine::Validation::kOff;
  // CUBEFORGE_SYNC_VALIDATION=1 adds hazard checks between commands and frames (slow; tests).
  if (const char* sync = std::getenv("CUBEFORGE_SYNC_VALIDATION"); sync && std::string(sync) == "1")
    context_options.synchronization_validation = true;
  context_options.instance_extensions = *extensions;
  auto context = engine::Context::create(context_options);
  if (!context.ok()) {
    app.log_error(std::string(engine::is_no_vulkan_device(context.error()) ? "no Vulkan device: " : "Vulkan: ") +
                  context.error().to_string() + " (install a Vulkan driver; Mesa's lavapipe works without a GPU)");
    return false;
  }
  viewport.context = std::move(context).value();
  auto renderer = engine::Renderer::create(*viewport.context);
  if (!renderer.ok()) {
    app.log_error("viewport renderer: " + renderer.error().to_string());
    return false;
  }
  viewport.renderer = std::move(renderer).value();

  const AppSettings& settings = app.state.settings;
  int width = app.options.width > 0 ? app.options.width : settings.window_width;
  int height = app.options.height > 0 ? app.options.height : settings.window_height;
  glfwWindowHint(GLFW_CLIENT_API, GLFW_NO_API);
  viewport.window = glfwCreateWindow(width, height, "cubeforge", nullptr, nullptr);
  if (!viewport.window) {
    app.log_error("cannot create a window of " + std::to_string(width) + "x" + std::to_string(height));
    return false;
  }
  engine::WindowOptions window_options;
  window_options.vsync = !script_mode;  // scripts run as fast as the machine allows
  // Anti-aliased edges (4x MSAA where offered). CUBEFORGE_MSAA=1 turns it off,
  // for a software rasteriser on a machine whose cores generation needs.
  if (const char* msaa = std::getenv("CUBEFORGE_MSAA"); msaa && std::string(msaa) == "1")
    window_options.samples = VK_SAMPLE_COUNT_1_BIT;
  auto target = engine::WindowTarget::create(*viewport.renderer, viewport.window, window_options);
  if (!target.ok()) {
    app.log_error("window swapchain: " + target.error().to_string());
    return false;
  }
  viewport.target = std::move(target).value();
  app.log("viewport on " + viewport.context->device_name() +
          (viewport.context->validation_enabled() ? std::string(" (Vulkan validation layer on)") : std::string()));

  // No imgui.ini: the panels' places are computed for the window's size
  // (core/panel_layout.h), so no saved arrangement can bring back a broken one.
  auto imgui = ImGuiOverlay::create(*viewport.context, *viewport.target, viewport.window);
  if (!imgui.ok()) {
    app.log_error("ImGui: " + imgui.error().to_string());
    return false;
  }
  viewport.imgui = std::move(imgui).value();
  ImGui::StyleColorsDark();
  ImGui::GetStyle().Alpha = 0.96f;
  return true;
}

// The history, the starting view, and the model: the one given, else the
// last used, else the built-in one (a script loads its own).
void open_history_and_model(App& app) {
  AppState& state = app.state;
  auto history = HistoryStore::open(state.data_folder / "history");
  if (history.ok()) {
    state.history.store = std::move(*history);
    for (const std::string& problem : state.history.store->problems()) app.log_error(problem);
  } else {
    state.history.problem = "The history cannot be read, and new shapes will not be kept: " +
                            history.error().to_string();
    app.log_error(state.history.problem);
  }

  state.view.scene.shading = state.settings.flat_shading ? engine::ShadingMode::kFlat : engine::ShadingMode::kSmooth;
  state.view.camera.pitch_degrees = 20.f;
  state.view.camera.yaw_degrees = 30.f;
  const std::string& given = app.options.model_folder;
  if (!state.script_mode) {
    std::string folder = !given.empty() ? given : state.settings.model_folder;
    if (folder.empty()) folder = default_model_folder().string();
    app.load_model(folder);
  } else if (!given.empty()) {
    app.load_model(given);
  }
}

// What is going on at this wakeup, for the redraw schedule.
RedrawCauses redraw_causes(App& app, bool worker_news) {
  AppState& state = app.state;
  ImGuiOverlay& imgui = *app.viewport.imgui;
  RedrawCauses causes;
  const bool popup_due = state.log.popup_pending && (!state.script_mode || state.log.popup_in_scripts);
  causes.input = !imgui.input().empty() || imgui.window_events() || popup_due;
  causes.worker_news = worker_news;
  const ImGuiIO& io = ImGui::GetIO();
  bool held = false;
  for (bool down : io.MouseDown) held |= down;
  for (bool down : io.KeysDown) held |= down;
  causes.motion = state.settings.turntable || state.view.drag_button >= 0 || held;
  causes.job_running = app.worker.busy();
  causes.script = state.script_mode && state.script.rest_wakeups_left == 0;
  return causes;
}

// A script's `rest N`: counts this wakeup, and whether it drew a frame.
void count_rest_wakeup(App& app, bool drew) {
  ScriptState& script = app.state.script;
  if (script.rest_wakeups_left == 0) return;
  ++script.rest_wakeups;
  if (drew) ++script.rest_frames;
  if (--script.rest_wakeups_left == 0) {
    char line[160];
    std::snprintf(line, sizeof line, "while resting: %d frames drawn in %d wakeups of the event loop",
                  script.rest_frames, script.rest_wakeups);
    app.log(line);
  }
}

void main_loop(App& app) {
  AppState& state = app.state;
  Viewport& viewport = app.viewport;
  // A focused text field draws nothing by itself: its cursor does not blink.
  ImGui::GetIO().ConfigInputTextCursorBlink = false;
  RedrawSchedule schedule;
  auto last_frame = Clock::now();
  float last_frame_ms = 0;  // how long the last frame took to make
  bool worker_news = false;
  bool generating_since_last_frame = false;
  while (!glfwWindowShouldClose(viewport.window) && !state.quit) {
    // Sleep until something happens, or until the next frame of whatever
    // moves by itself is due (core/redraw_schedule.h); the worker's news and
    // a person's input end the sleep at once.
    const double wait =
        schedule.wait_seconds(redraw_causes(app, worker_news), ms_between(last_frame, Clock::now()) / 1000.0);
    if (wait <= 0) glfwPollEvents();
    // A resting script counts wakeups, not seconds: it wakes often to count them soon.
    else
      glfwWaitEventsTimeout(state.script_mode ? std::min(wait, kScriptRestWakeupSeconds) : wait);
    const auto woke = Clock::now();

    const bool idle = !app.worker.busy();
    generating_since_last_frame |= state.generation.generating;
    worker_news = handle_worker_messages(app);
    app.calibrate_detail_when_due();
    const bool draw = schedule.should_draw(redraw_causes(app, worker_news), ms_between(last_frame, woke) / 1000.0);
    count_rest_wakeup(app, draw);
    if (!draw) continue;
    worker_news = false;
    // The time since the last frame moves what moves by itself; a sleep
    // before this frame does not make the turntable jump.
    const float since_last_ms = std::min(static_cast<float>(ms_between(last_frame, woke)), 250.f);
    last_frame = woke;

    step_script(app, last_frame_ms, idle);
    app.keep_model_in_chosen_weights();

    viewport.imgui->new_frame();
    update_layout(app);
    handle_viewport_input(app, since_last_ms / 1000.f);
    draw_panels(app);
    engine::SceneSettings& scene = state.view.scene;
    scene.wireframe = state.settings.wireframe && viewport.renderer->supports_wireframe();
    scene.shading = state.settings.flat_shading ? engine::ShadingMode::kFlat : engine::ShadingMode::kSmooth;
    scene.grid = state.settings.grid;
    if (scene.wireframe) {
      const Bounds3 bounds = viewport.renderer->mesh_bounds();
      const engine::OrbitCamera& camera = state.view.camera;
      float radius = 0.f;
      for (int a = 0; a < 3; ++a) radius += (bounds.max[a] - bounds.min[a]) * (bounds.max[a] - bounds.min[a]);
      radius = 0.5f * std::sqrt(radius);
      const float half_view = camera.distance * std::tan(camera.fov_y_degrees * 3.14159265f / 360.f);
      const float pixels = radius / std::max(half_view, 1e-6f) * 0.5f * state.layout.height * camera.region.height();
      scene.wire_color[3] = wireframe_opacity(state.view.shown_faces, pixels);
    }
    const engine::OverlayRecorder overlay = viewport.imgui->render();
    auto status = viewport.target->draw_frame(state.view.camera, scene, overlay);
    if (!status.ok()) {
      app.log_error("drawing the window: " + status.error().to_string());
      break;
    }
    schedule.frame_drawn();
    for (double pressed : viewport.imgui->take_key_press_times()) {
      const float latency = static_cast<float>(glfwGetTime() * 1000.0 - pressed);
      state.frames.key_to_frame_ms.push_back(latency);
      if (app.worker.busy()) state.frames.key_to_frame_generating_ms.push_back(latency);
    }
    if (*status == engine::FrameStatus::kMinimised) glfwWaitEventsTimeout(0.05);
    // Without vsync (scripts) frames are paced to 60 per second as a display
    // would, so the UI does not take cores from generation for frames nobody sees.
    if (state.script_mode) {
      const double spent_ms = ms_between(woke, Clock::now());
      if (spent_ms < kFramePeriodMs)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kFramePeriodMs - spent_ms));
    }
    // A frame counts as drawn while generating when a generation was running
    // at any wakeup since the last frame, up to and including the one that
    // hears it has finished: a run shorter than a frame still has its frame.
    last_frame_ms = static_cast<float>(ms_between(woke, Clock::now()));
    state.frames.add(last_frame_ms, generating_since_last_frame);
    generating_since_last_frame = false;
  }
}

// After the loop: the frame-time summary, the window size and settings kept,
// and what a script run reports. Returns the exit code.
int finish(App& app) {
  AppState& state = app.state;
  Viewport& viewport = app.viewport;
  app.worker.cancel();
  viewport.context->wait_idle();
  FrameTimeSummary recent = summarise(std::vector<float>(state.frames.recent_ms.begin(), state.frames.recent_ms.end()));
  char line[200];
  std::snprintf(line, sizeof line, "frame times of the last %d frames: mean %.1f ms, p95 %.1f ms, max %.1f ms",
                recent.frames, recent.mean_ms, recent.p95_ms, recent.max_ms);
  app.log(line);
  if (!state.frames.key_to_frame_ms.empty()) {
    FrameTimeSummary keys = summarise(state.frames.key_to_frame_ms);
    std::snprintf(line, sizeof line, "key press to frame: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d presses)",
                  keys.mean_ms, keys.p95_ms, keys.max_ms, keys.frames);
    app.log(line);
  }
  int width = 0, height = 0;
  glfwGetWindowSize(viewport.window, &width, &height);
  if (!state.script_mode && width > 0 && height > 0) {
    state.settings.window_width = width;
    state.settings.window_height = height;
  }
  app.save_settings_now();
  if (viewport.validation->errors.load() > 0)
    app.log_error("the Vulkan validation layer reported " + std::to_string(viewport.validation->errors.load()) +
                  " errors");
  const ScriptState& script = state.script;
  if (state.script_mode && script.next < script.commands.size())
    app.log_error("the window closed before the script finished (line " +
                  std::to_string(script.commands[script.next].line) + ")");
  return state.script_mode && state.log.errors > 0 ? 1 : 0;
}

// In reverse order of creation, after the device is idle.
void shutdown(App& app) {
  Viewport& viewport = app.viewport;
  app.worker.set_wake({});  // no empty events after the window system is gone
  if (viewport.context) viewport.context->wait_idle();
  viewport.imgui.reset();
  viewport.capture.reset();
  viewport.thumbnails.reset();
  viewport.target.reset();
  viewport.renderer.reset();
  viewport.context.reset();
  if (viewport.window) glfwDestroyWindow(viewport.window);
  viewport.window = nullptr;
  if (viewport.glfw_ready) glfwTerminate();
  viewport.glfw_ready = false;
}

}  // namespace

int run_desktop_app(const LaunchOptions& options) {
  App app(options);
  int code = 2;  // could not start
  if (load_state(app) && start_window_and_engine(app)) {
    // The worker's news wakes the main loop from its wait for events.
    app.worker.set_wake([] { glfwPostEmptyEvent(); });
    open_history_and_model(app);
    main_loop(app);
    code = finish(app);
  }
  shutdown(app);
  return code;
}

}  // namespace cubeforge::app
