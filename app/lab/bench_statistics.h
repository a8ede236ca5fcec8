// Summaries of repeated timings, and the clocks they read, shared by the
// benchmark and comparison commands.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace cubeforge::cli {

// The q-quantile (0 ≤ q ≤ 1) of `values`, interpolating between neighbours; 0 for none.
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double position = q * double(values.size() - 1);
  const size_t lo = size_t(position);
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (position - double(lo));
}

inline double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// CPU time of every thread of the process: on a shared machine wall time
// also counts the time other processes held the cores.
inline double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return 1e3 * double(t.tv_sec) + 1e-6 * double(t.tv_nsec);
}

}  // namespace cubeforge::cli
