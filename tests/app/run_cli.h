// cubeforge-cli run as a user would, for the tests of test_cli (whose
// CMakeLists names the binary in CUBEFORGE_CLI_PATH).
#pragma once

#include <filesystem>
#include <string>

#include "tests/support/run_command.h"

namespace cubeforge::testing {

inline CommandOutput run_cli(const std::string& arguments) { return run_command(CUBEFORGE_CLI_PATH, arguments); }

// `path` in single quotes, for a command line. Appended: GCC 12 misreads
// `literal + string` here as overlapping copies.
inline std::string quoted(const std::filesystem::path& path) {
  std::string text = "'";
  text += path.string();
  text += '\'';
  return text;
}

// The arguments of a small, quick generation from the built-in model.
inline std::string quick_generate(const std::filesystem::path& out, const std::string& extra = "") {
  return "generate --prompt 'a tall chair' --resolution 4 --out " + quoted(out) + " " + extra;
}

}  // namespace cubeforge::testing
