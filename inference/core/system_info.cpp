// Memory bandwidth probe and peak RSS.
#include "inference/core/system_info.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>
#include <memory>

#include "inference/core/thread_pool.h"

namespace cubeforge {

MemoryBandwidth measure_memory_bandwidth(size_t bytes, int repeats) {
  const size_t count = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> source(new uint64_t[count]);
  std::unique_ptr<uint64_t[]> target(new uint64_t[count]);
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
    // Four independent float sums per thread keep the loads streaming.
    pool.parallel_for(shares, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t share = s0; share < s1; ++share) {
        const size_t per = (count + size_t(shares) - 1) / size_t(shares);
        const size_t begin = std::min(count, per * size_t(share));
        const size_t end = std::min(count, begin + per);
        const double* data = reinterpret_cast<const double*>(source.get());
        double a = 0, b = 0, c = 0, d = 0;
        size_t i = begin;
        for (; i + 4 <= end; i += 4) {
          a += data[i];
          b += data[i + 1];
          c += data[i + 2];
          d += data[i + 3];
        }
        for (; i < end; ++i) a += data[i];
        partial[size_t(share)] = a + b + c + d;
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
        std::memcpy(target.get() + begin, source.get() + begin, (end - begin) * sizeof(uint64_t));
      }
    });
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best.copy_gbps = std::max(best.copy_gbps, 2.0 * double(bytes) / seconds / 1e9);
  }
  return best;
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace cubeforge
