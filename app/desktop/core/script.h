// The app's script mode (`cubeforge --script FILE`): the real app in a real
// window, driven by one command per line instead of a person.
//
//   model DIR          load a model folder (relative paths: to the script's folder)
//   prompt TEXT        the prompt
//   set KEY VALUE      a setting, by its settings.json name (set_setting)
//   generate           start a generation
//   latency            run the latency demo
//   cancel             cancel what runs
//   wait               wait until nothing runs
//   idle N             let N frames pass, then log their frame times (a baseline
//                      for the frame times logged while generating)
//   export PATH        export the current mesh (format from the extension)
//   screenshot PATH    save the viewport as PNG
//   quit               close the app
//
// Blank lines and lines starting with '#' are ignored. Each command runs when
// the app is idle (no load or generation running), so `wait` is explicit
// punctuation, except `cancel`, which runs at once.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge::app {

struct ScriptCommand {
  enum class Kind { kModel, kPrompt, kSet, kGenerate, kLatency, kCancel, kWait, kIdle, kExport, kScreenshot, kQuit };
  Kind kind = Kind::kWait;
  std::string argument;  // kSet: "KEY VALUE"
  int line = 0;
};

Result<std::vector<ScriptCommand>> parse_script(const std::string& text);
Result<std::vector<ScriptCommand>> load_script(const std::filesystem::path& path);

}  // namespace cubeforge::app
