// Signal handling and the stage pause for tests (see interrupt.h).
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
std::atomic<int> g_signal{0};

constexpr int kCancellingSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_interrupt(int number) {
  int none = 0;
  g_signal.compare_exchange_strong(none, number);
  if (g_interrupted.exchange(true)) {
    // The second signal: stop now, the way an unhandled one would.
    std::signal(number, SIG_DFL);
    std::raise(number);
  }
}

void on_resume(int) { g_resumed = 1; }

}  // namespace

const std::atomic<bool>& interrupted() { return g_interrupted; }

void install_interrupt_handler() {
  for (int number : kCancellingSignals) std::signal(number, on_interrupt);
}

int cancelled_exit_code() {
  const int number = g_signal.load();
  return 128 + (number ? number : SIGINT);
}

const char* cancelling_signal_name() {
  switch (g_signal.load()) {
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "Ctrl+C";
  }
}

void ignore_file_size_signal() { std::signal(SIGXFSZ, SIG_IGN); }

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
