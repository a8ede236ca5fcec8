// Memory bandwidth probe and peak RSS.
#include "inference/core/system_info.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <memory>

#include "inference/core/thread_pool.h"

namespace cubeforge {

namespace {

class HugePageBuffer {
 public:
  explicit HugePageBuffer(size_t bytes) : bytes_(bytes) {
    data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      return;
    }
    ::madvise(data_, bytes, MADV_HUGEPAGE);
  }
  ~HugePageBuffer() {
    if (data_) ::munmap(data_, bytes_);
  }
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

MemoryBandwidth measure_memory_bandwidth(size_t bytes, int repeats) {
  const size_t count = bytes / sizeof(uint64_t);
  // Huge pages, like the weights: on virtual machines the page walks of 4 KiB
  // pages alone cap streaming reads well below what the memory delivers.
  HugePageBuffer source_buffer(count * sizeof(uint64_t)), target_buffer(count * sizeof(uint64_t));
  uint64_t* source = static_cast<uint64_t*>(source_buffer.data());
  uint64_t* target = static_cast<uint64_t*>(target_buffer.data());
  if (!source || !target) return MemoryBandwidth{};
  ThreadPool& pool = ThreadPool::global();
  pool.parallel_for(int64_t(count), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      source[size_t(i)] = uint64_t(i);
      target[size_t(i)] = 0;
    }
  });
  const int shares = pool.size();
  std::vector<double> partial(static_cast<size_t>(shares));
  MemoryBandwidth best;
  volatile uint64_t sink = 0;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    pool.parallel_for(shares, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t share = s0; share < s1; ++share) {
        const size_t per = (count + size_t(shares) - 1) / size_t(shares);
        const size_t begin = std::min(count, per * size_t(share));
        const size_t end = std::min(count, begin + per);
        // Four interleaved streams per thread, as the matrix-vector kernels
        // read four weight rows at once; integer sums vectorise freely, so
        // the loop is limited by memory, not by adds.
        const size_t quarter = (end - begin) / 4;
        const uint64_t* s0 = source + begin;
        const uint64_t* s1 = s0 + quarter;
        const uint64_t* s2 = s1 + quarter;
        const uint64_t* s3 = s2 + quarter;
        uint64_t sum = 0;
        for (size_t i = 0; i < quarter; ++i) sum += s0[i] + s1[i] + s2[i] + s3[i];
        for (size_t i = begin + 4 * quarter; i < end; ++i) sum += source[i];
        partial[size_t(share)] = double(sum);
      }
    });
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (double p : partial) sink = sink + uint64_t(p != 0.0);
    best.read_gbps = std::max(best.read_gbps, double(bytes) / seconds / 1e9);

    start = std::chrono::steady_clock::now();
    pool.parallel_for(shares, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t share = s0; share < s1; ++share) {
        const size_t per = (count + size_t(shares) - 1) / size_t(shares);
        const size_t begin = std::min(count, per * size_t(share));
        const size_t end = std::min(count, begin + per);
        std::memcpy(target + begin, source + begin, (end - begin) * sizeof(uint64_t));
      }
    });
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best.copy_gbps = std::max(best.copy_gbps, 2.0 * double(bytes) / seconds / 1e9);
  }
  return best;
}

MemoryBandwidth measure_memory_bandwidth_isolated(size_t bytes, int repeats) {
  int fds[2];
  if (::pipe(fds) != 0) return measure_memory_bandwidth(bytes, repeats);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return measure_memory_bandwidth(bytes, repeats);
  }
  if (child == 0) {
    ::close(fds[0]);
    const MemoryBandwidth measured = measure_memory_bandwidth(bytes, repeats);
    const ssize_t written = ::write(fds[1], &measured, sizeof measured);
    ::_exit(written == ssize_t(sizeof measured) ? 0 : 1);
  }
  ::close(fds[1]);
  MemoryBandwidth measured;
  size_t got = 0;
  while (got < sizeof measured) {
    const ssize_t n = ::read(fds[0], reinterpret_cast<char*>(&measured) + got, sizeof measured - got);
    if (n <= 0) break;
    got += size_t(n);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return got == sizeof measured ? measured : MemoryBandwidth{};
}

std::optional<double> reported_cpu_ghz() {
  FILE* file = std::fopen("/proc/cpuinfo", "r");
  if (!file) return std::nullopt;
  char line[512];
  std::optional<double> ghz;
  while (!ghz && std::fgets(line, sizeof line, file)) {
    double mhz = 0;
    if (std::strncmp(line, "cpu MHz", 7) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon && std::sscanf(colon + 1, "%lf", &mhz) == 1 && mhz > 0) ghz = mhz / 1000.0;
    }
  }
  std::fclose(file);
  return ghz;
}

std::optional<uint64_t> address_space_left() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  uint64_t mapped = 0;
  if (FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, status))
      if (std::strncmp(line, "VmSize:", 7) == 0) mapped = std::strtoull(line + 7, nullptr, 10) * 1024;  // kB
    std::fclose(status);
  }
  return uint64_t(limit.rlim_cur) > mapped ? uint64_t(limit.rlim_cur) - mapped : 0;
}

void share_one_malloc_arena_under_address_limit() {
  if (address_space_left()) ::mallopt(M_ARENA_MAX, 1);
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace cubeforge
