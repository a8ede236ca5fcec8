// cubeforge-cli run as a user would, for the tests of test_cli (whose
// CMakeLists names the binary in CUBEFORGE_CLI_PATH).
#pragma once

#include <string>

#include "tests/support/run_command.h"

namespace cubeforge::testing {

inline CommandOutput run_cli(const std::string& arguments) { return run_command(CUBEFORGE_CLI_PATH, arguments); }

}  // namespace cubeforge::testing
