// Running a project binary as a user would, for tests of command-line tools:
// stdout and stderr together, and the exit code.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace cubeforge::testing {

struct CommandOutput {
  int exit_code = -1;  // -1: did not start or did not exit normally
  std::string out;     // stdout and stderr interleaved
};

// Runs `binary arguments` through the shell (quote arguments yourself).
inline CommandOutput run_command(const std::string& binary, const std::string& arguments) {
  const std::string command = binary + " " + arguments + " 2>&1";
  CommandOutput result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace cubeforge::testing
