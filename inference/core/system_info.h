// What the benchmarks report about the machine: memory bandwidth, the
// clock, and the process's peak memory; and the room left under a limit on
// address space.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

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

// The clock the system reports for the first CPU (/proc/cpuinfo's "cpu MHz"),
// in GHz, or nothing where it reports none. Under a hypervisor it is usually
// the base clock; on bare metal the current one, which turbo and power saving
// move.
std::optional<double> reported_cpu_ghz();

// Peak resident set size of this process, in MiB.
double peak_rss_mib();

// Bytes this process may still map under its limit on address space
// (RLIMIT_AS, `ulimit -v`), or nothing when there is no limit. Everything
// mapped counts against such a limit: reservations that hold no memory yet
// (thread stacks, malloc arenas, BLAS work buffers) as much as data.
std::optional<uint64_t> address_space_left();

// Under such a limit, makes every thread allocate from one malloc arena:
// glibc otherwise reserves 64 MiB of address space for each thread's own.
// Does nothing without a limit. Call before starting threads.
void share_one_malloc_arena_under_address_limit();

}  // namespace cubeforge
