// cubeforge-cli and cubeforge-lab run as a user would, for the tests of
// test_cli (whose CMakeLists names the binaries in CUBEFORGE_CLI_PATH and
// CUBEFORGE_LAB_PATH); a measuring command runs on cubeforge-lab.
#pragma once

#include <filesystem>
#include <string>

#include "tests/support/programs.h"
#include "tests/support/run_command.h"

namespace cubeforge::testing {

inline CommandOutput run_cli(const std::string& arguments) { return run_command(program_for(arguments), arguments); }

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
