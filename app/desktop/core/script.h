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
//   rest N             leave the app alone as a person's idle app is left, for
//                      N wakeups of its event loop, then log how many frames
//                      it drew meanwhile (an idle app draws none)
//   calibrate          time one small generation to pick the default detail, as
//                      a person's first launch does (core/detail_timing.h)
//   export PATH        export the current mesh (format from the extension)
//   screenshot PATH    save the viewport as PNG
//   quit               close the app
//   wait-preview       wait until the run in progress shows a preview
//   hold-previews      tests: from here on a run waits after each preview
//                      until it is cancelled (GenerationWorker::hold_after_previews),
//                      so that `wait-preview` then `cancel` cancels a run with a
//                      preview on screen however fast the machine is
//
// Input, through the same queue as a person's (core/input_queue.h), each
// command's events in one burst as if they all came during one frame:
//   click AT           press and release the left button AT
//   drag AT DX DY      press the left button AT, move by (DX, DY), release
//                      (drag-right: the right button)
//   key CHORD          press and release, e.g. ctrl+a, ctrl+enter, f, tab, home
//   type TEXT          type the characters
// AT is window pixels "X Y" or a named widget's centre: prompt, generate,
// cancel, reset-camera, viewport (the free part of the view), and the other
// names the panels record.
// The window:
//   resize W H         resize the window and wait until the swapchain follows
//   reset-layout       every panel back to its place
//   dump PATH          write what the window shows as JSON (panel places,
//                      camera, prompt, progress, log, texts the panels show
//                      by name): what tests check
//   error-popup        from here on, errors open the error popup as they do
//                      for a person (its modal takes the clicks until
//                      `click error-ok` closes it)
//
// Blank lines and lines starting with '#' are ignored. Each command runs when
// the app is idle (no load or generation running), so `wait` is explicit
// punctuation, except `cancel`, the input and window commands, `dump`, `error-popup`,
// `wait-preview` and `hold-previews`, which run at once; the command after an input command waits until the
// input has been handed to the panels.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge::app {

struct ScriptCommand {
  enum class Kind {
    kModel, kPrompt, kSet, kGenerate, kLatency, kCancel, kWait, kIdle, kRest, kCalibrate, kExport, kScreenshot, kQuit,
    kClick, kDrag, kDragRight, kKey, kType, kResize, kResetLayout, kDump, kErrorPopup, kWaitPreview, kHoldPreviews
  };
  Kind kind = Kind::kWait;
  std::string argument;  // kSet: "KEY VALUE"
  int line = 0;
  // kClick, kDrag: where (a widget's name, else window pixels) and how far.
  std::string target;
  float x = 0, y = 0, dx = 0, dy = 0;
  int width = 0, height = 0;  // kResize
  std::vector<int> keys;      // kKey: GLFW key codes, modifiers first
  // Runs only once no load or generation runs.
  bool waits_for_idle() const;
};

Result<std::vector<ScriptCommand>> parse_script(const std::string& text);
Result<std::vector<ScriptCommand>> load_script(const std::filesystem::path& path);

}  // namespace cubeforge::app
