// Running a program and measuring what it cost: exit code or signal, wall
// time, peak resident memory (getrusage of the child), and bytes it read
// through read()/pread() (the kernel's rchar, taken from the exited child
// before it is reaped). A guard kills a run past a wall-clock or resident-
// memory cap, so that a runaway case cannot take the machine with it; tests
// bound memory and bytes read, which do not depend on the machine's speed,
// and use the wall-clock cap only against hangs. A child's peak includes what
// this process held when it forked (the kernel counts the copy until exec), a
// few MB here.
#pragma once

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace cubeforge::testing {

struct RunLimits {
  double wall_seconds = 60;                 // killed after this long (a hang guard)
  uint64_t resident_bytes = uint64_t(2) << 30;  // killed when its resident memory passes this
  uint64_t stack_bytes = 0;                 // RLIMIT_STACK for the child (0: inherited)
};

struct MeasuredRun {
  int exit_code = -1;        // when it exited
  int signal = 0;            // when a signal ended it (not the guard's)
  bool killed_for_time = false;
  bool killed_for_memory = false;
  double seconds = 0;
  uint64_t peak_resident_bytes = 0;
  uint64_t bytes_read = 0;   // rchar: read(), pread() and friends
  std::string output;        // stdout and stderr together

  bool exited() const { return signal == 0 && !killed_for_time && !killed_for_memory && exit_code >= 0; }
  // "exit 1", "SIGSEGV", "killed past 20 s", "killed past 2048 MB".
  std::string outcome() const {
    if (killed_for_time) return "killed (time guard)";
    if (killed_for_memory) return "killed (memory guard)";
    if (signal != 0) return std::string("SIG") + sigabbrev_np(signal);
    return "exit " + std::to_string(exit_code);
  }
};

namespace measured_run_detail {

inline uint64_t proc_field(pid_t pid, const char* file, const char* field, uint64_t scale) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
  std::string line;
  const size_t length = std::strlen(field);
  while (std::getline(in, line))
    if (line.compare(0, length, field) == 0) return std::strtoull(line.c_str() + length, nullptr, 10) * scale;
  return 0;
}

}  // namespace measured_run_detail

// Runs argv[0] (a path) with argv, its environment this process's plus
// `environment`. `watch` sees the output as it grows and may act on the child
// (change a file it reads, signal it); it returns false once it has nothing more to do.
inline MeasuredRun run_measured(const std::vector<std::string>& argv, const RunLimits& limits = {},
                                const std::vector<std::string>& environment = {},
                                std::function<bool(const std::string& output, pid_t pid)> watch = {}) {
  MeasuredRun run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return run;
  std::vector<std::string> env_strings(environment);
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  // A child's peak starts at this process's resident size when it forks (the
  // kernel counts the copy until exec): give back what building the case freed.
  ::malloc_trim(0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return run;
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    if (limits.stack_bytes) {
      rlimit stack{rlim_t(limits.stack_bytes), rlim_t(limits.stack_bytes)};
      ::setrlimit(RLIMIT_STACK, &stack);
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);  // the last read must not wait on a process the child left behind
  bool watching = bool(watch);
  bool open = true;
  for (;;) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 10) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
        if (n > 0) run.output.append(buffer, size_t(n));
        else open = false;
      }
    } else {
      ::usleep(10000);
    }
    if (watching) watching = watch(run.output, pid);
    siginfo_t info{};
    if (::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const uint64_t resident = measured_run_detail::proc_field(pid, "status", "VmRSS:", 1024);
    if (elapsed > limits.wall_seconds || resident > limits.resident_bytes) {
      (elapsed > limits.wall_seconds ? run.killed_for_time : run.killed_for_memory) = true;
      ::kill(pid, SIGKILL);
    }
  }
  // Exited, not yet reaped: its I/O counters are still readable.
  run.bytes_read = measured_run_detail::proc_field(pid, "io", "rchar:", 1);
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.peak_resident_bytes = uint64_t(usage.ru_maxrss) * 1024;
  for (;;) {  // what is left in the pipe
    char buffer[4096];
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    run.output.append(buffer, size_t(n));
  }
  ::close(fds[0]);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status) && !run.killed_for_time && !run.killed_for_memory) run.signal = WTERMSIG(status);
  return run;
}

}  // namespace cubeforge::testing
