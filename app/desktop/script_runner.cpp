// The script mode's steps (--script): one command per idle frame, and the
// frame-time count of `idle N`. The commands are described in core/script.h.
#include <cstdio>

#include "app/desktop/app.h"

namespace cubeforge::app {

namespace {

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
  }
}

}  // namespace

void step_script(App& app, float frame_ms, bool idle) {
  AppState& state = app.state;
  ScriptState& script = state.script;
  if (script.idle_frames_left > 0) {
    script.idle_frame_ms.push_back(frame_ms);
    if (--script.idle_frames_left == 0) {
      FrameTimeSummary s = summarise(script.idle_frame_ms);
      char line[200];
      std::snprintf(line, sizeof line, "frame times while idle: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d frames)",
                    s.mean_ms, s.p95_ms, s.max_ms, s.frames);
      app.log(line);
    }
  } else if (state.script_mode && idle) {
    if (script.next < script.commands.size()) run_command(app, script.commands[script.next++]);
    else state.quit = true;
  }
}

}  // namespace cubeforge::app
