// Ctrl+C handling and the stage pause for tests (see interrupt.h).
#include "app/cli/interrupt.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace cubeforge::cli {

namespace {

std::atomic<bool> g_interrupted{false};
volatile std::sig_atomic_t g_resumed = 0;

void on_interrupt(int) {
  if (g_interrupted.exchange(true)) {
    // The second Ctrl+C: stop now, the way an unhandled SIGINT would.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

void on_resume(int) { g_resumed = 1; }

}  // namespace

const std::atomic<bool>& interrupted() { return g_interrupted; }

void install_interrupt_handler() { std::signal(SIGINT, on_interrupt); }

void pause_if_testing(const char* stage) {
  const char* wanted = std::getenv("CUBEFORGE_TEST_PAUSE_AT");
  if (!wanted || std::strcmp(wanted, stage) != 0) return;
  g_resumed = 0;
  std::signal(SIGUSR1, on_resume);
  std::fprintf(stderr, "paused at %s\n", stage);
  std::fflush(stderr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!g_interrupted.load() && !g_resumed && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

}  // namespace cubeforge::cli
