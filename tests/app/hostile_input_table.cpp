// cubeforge-hostile-table: runs every case of tests/support/hostile_input_cases.h
// against a build of cubeforge-cli and prints one Markdown row per case:
// outcome, wall time, peak resident memory, bytes read, and whether the run
// ended as a correct one does (exit code and message). A guard stops a run at
// 2 GiB resident or 20 s, so an old build's worst cases cannot take the machine.
//
//   cubeforge-hostile-table [--cli PATH] [--only NAME]...
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/hostile_input_cases.h"
#include "tests/support/programs.h"
#include "tests/support/measured_run.h"

int main(int argc, char** argv) {
  using namespace cubeforge::testing;
  std::string cli = CUBEFORGE_CLI_PATH, lab = CUBEFORGE_LAB_PATH;
  std::vector<std::string> only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cli") == 0) cli = argv[i + 1];
    else if (std::strcmp(argv[i], "--lab") == 0) lab = argv[i + 1];
    else if (std::strcmp(argv[i], "--only") == 0) only.push_back(argv[i + 1]);
  }
  std::printf("| case | outcome | time (s) | peak memory (MB) | read (MB) | as expected |\n");
  std::printf("|---|---|---:|---:|---:|---|\n");
  int unexpected = 0;
  for (const HostileCase& c : hostile_input_cases()) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    ScratchFolder folder("hostile-table");
    std::vector<std::string> argv_run = c.build(folder.path());
    argv_run.insert(argv_run.begin(), is_lab_command(argv_run.front()) ? lab : cli);
    RunLimits limits;
    limits.wall_seconds = 20;
    limits.stack_bytes = c.stack_bytes;
    std::function<bool(const std::string&, pid_t)> watch;
    if (c.during) watch = [&](const std::string& out, pid_t pid) { return c.during(out, pid, folder.path()); };
    const MeasuredRun run = run_measured(argv_run, limits, c.environment, watch);
    const bool expected = run.exited() && run.exit_code == c.expected_exit &&
                          run.output.find(c.expected_output) != std::string::npos;
    unexpected += !expected;
    std::printf("| %s | %s | %.2f | %.0f | %.1f | %s |\n", c.name.c_str(), run.outcome().c_str(), run.seconds,
                double(run.peak_resident_bytes) / (1 << 20), double(run.bytes_read) / (1 << 20),
                expected ? "yes" : "no");
    std::fflush(stdout);
    if (std::getenv("CUBEFORGE_HOSTILE_TABLE_OUTPUT")) {
      std::string tail = run.output.size() > 400 ? run.output.substr(run.output.size() - 400) : run.output;
      std::fprintf(stderr, "--- %s:\n%s\n", c.name.c_str(), tail.c_str());
    }
  }
  return unexpected == 0 ? 0 : 1;
}
