// Ctrl+C, SIGTERM and SIGHUP on the command line. The first one sets a flag
// that every stage checks, up to the final rename of the output: the run ends
// with exit code 128 + the signal (130 for Ctrl+C, 143 for SIGTERM, 129 for
// SIGHUP), nothing half-written, no temporary left, and an existing output
// file untouched. A second one ends the process at once, as the signal would
// (still atomic: a file is either replaced whole or not at all).
//
// Commands that honour the flag install the handler; the others keep the
// signals' default (ending at once), which leaves nothing half-written either.
#pragma once

#include <atomic>

namespace cubeforge::cli {

const std::atomic<bool>& interrupted();
void install_interrupt_handler();

// After an interrupt: 128 + the signal that stopped the run, as shells report
// it, and its name for messages ("Ctrl+C", "SIGTERM", "SIGHUP").
int cancelled_exit_code();
const char* cancelling_signal_name();

// Writes past the limit on file size (ulimit -f) end in an error that says so
// and removes the temporary, instead of SIGXFSZ ending the process with the
// temporary left behind. Called once at start.
void ignore_file_size_signal();

// Test hook, for tests that interrupt a run at a given stage: with
// CUBEFORGE_TEST_PAUSE_AT=STAGE in the environment, a run reaching STAGE
// (text, meshing, cleanup, export, rename, calibration, copy) says "paused at
// STAGE" on stderr and waits until it is interrupted, or resumed with SIGUSR1
// (a test that changes a file the run reads), at most 30 seconds, then goes
// on. Without the variable it does nothing.
void pause_if_testing(const char* stage);

}  // namespace cubeforge::cli
