// Which of the project's programs runs a command: the measuring commands are
// cubeforge-lab's (app/lab/), the product's cubeforge-cli's (app/cli/). Tests
// that run both name the binaries in CUBEFORGE_CLI_PATH and CUBEFORGE_LAB_PATH.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace cubeforge::testing {

// Every build's; bench-viewport is built with the Vulkan engine only.
inline constexpr std::array<std::string_view, 11> kLabCommands = {
    "bench",        "bench-decoding", "compare-decoding", "bench-occupancy",    "bench-meshing",        "trace-diff",
    "calibrate-kv", "compare",        "bench-geometry",   "bench-text-encoder", "bench-shape-tokenizer"};
inline constexpr std::string_view kLabViewportCommand = "bench-viewport";

// Whether the first word of `arguments` is a command of cubeforge-lab.
inline bool is_lab_command(std::string_view arguments) {
  const std::string_view command = arguments.substr(0, arguments.find(' '));
  for (std::string_view lab : kLabCommands)
    if (command == lab) return true;
  return command == kLabViewportCommand;
}

#if defined(CUBEFORGE_CLI_PATH) && defined(CUBEFORGE_LAB_PATH)
// The binary that runs `arguments`.
inline std::string program_for(std::string_view arguments) {
  return is_lab_command(arguments) ? CUBEFORGE_LAB_PATH : CUBEFORGE_CLI_PATH;
}
#endif

}  // namespace cubeforge::testing
