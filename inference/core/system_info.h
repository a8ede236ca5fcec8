// What the benchmarks report about the machine: memory bandwidth and the
// process's peak memory.
#pragma once

#include <cstddef>

namespace cubeforge {

struct MemoryBandwidth {
  double read_gbps = 0;  // streaming reads over `bytes`, all threads
  double copy_gbps = 0;  // memcpy, counting bytes read plus bytes written
};

// Streams a buffer larger than the caches a few times and keeps the best run.
MemoryBandwidth measure_memory_bandwidth(size_t bytes = size_t(1) << 30, int repeats = 3);

// The same probe in a child process: the parent's peak memory is untouched
// and the probe gets fresh memory (huge pages are still available). Call it
// before starting threads. Falls back to measuring in-process if fork fails.
MemoryBandwidth measure_memory_bandwidth_isolated(size_t bytes = size_t(1) << 30, int repeats = 3);

// Peak resident set size of this process, in MiB.
double peak_rss_mib();

}  // namespace cubeforge
