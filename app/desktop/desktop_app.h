// The desktop app: the engine's viewport fills the window and Dear ImGui
// panels float over it (prompt and settings, live statistics with the token
// grid, history, export and view, log).
//
// Threads: the UI thread owns every Vulkan and ImGui object; model loading
// and generation run on GenerationWorker's thread and reach the UI only
// through its message queue, drained at the top of each frame. A script
// (--script) drives the same app one command per idle frame.
#pragma once

#include <string>

namespace cubeforge::app {

struct LaunchOptions {
  std::string script;        // --script FILE
  std::string data_folder;   // --data-dir DIR (else resolve_data_folder())
  std::string model_folder;  // --model DIR (else settings, else the built-in model)
  std::string prompt;        // --prompt TEXT
  int width = 0, height = 0; // --size WxH (else the saved window size)
};

// Runs until the window closes or the script says `quit`. Returns 0, or 1
// when a script run logged an error, or 2 when the app could not start.
int run_desktop_app(const LaunchOptions& options);

}  // namespace cubeforge::app
