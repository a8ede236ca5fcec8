// Ctrl+C on the command line. The first one sets a flag that every stage
// checks, up to the final rename of the output: the run ends with exit code
// 130, nothing half-written, and an existing output file untouched. A second
// Ctrl+C ends the process at once (still atomic: a file is either replaced
// whole or not at all).
#pragma once

#include <atomic>

namespace cubeforge::cli {

inline constexpr int kExitCancelled = 130;  // 128 + SIGINT, as shells report it

const std::atomic<bool>& interrupted();
void install_interrupt_handler();

// Test hook, for tests that interrupt a run at a given stage: with
// CUBEFORGE_TEST_PAUSE_AT=STAGE in the environment, a run reaching STAGE
// (text, meshing, cleanup, export, rename) says "paused at STAGE" on stderr
// and waits until it is interrupted, or resumed with SIGUSR1 (a test that
// changes a file the run reads), at most 30 seconds, then goes on. Without
// the variable it does nothing.
void pause_if_testing(const char* stage);

}  // namespace cubeforge::cli
