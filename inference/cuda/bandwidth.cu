// Bandwidth probe (see bandwidth.h). The buffer should be several times the
// L2 (50 MB on an H200) so the figures are HBM's, not the cache's: the default
// is 1 GiB, two of which are allocated for the copy.
#include <algorithm>

#include "inference/cuda/bandwidth.h"
#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/device_memory.h"

namespace cubeforge::cuda {
namespace {

using namespace detail;

constexpr int kReadThreads = 256;

// Grid-stride read of `count` 16-byte words; one word per block is written so
// the loads cannot be removed.
__global__ void __launch_bounds__(kReadThreads) read_kernel(const uint4* data, size_t count, uint32_t* sink) {
  uint32_t checksum = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = __ldcs(data + i), b = __ldcs(data + i + stride);
    const uint4 c = __ldcs(data + i + 2 * stride), d = __ldcs(data + i + 3 * stride);
    checksum ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < count; i += stride) {
    const uint4 a = __ldcs(data + i);
    checksum ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  checksum = __reduce_xor_sync(kFullMask, checksum);
  if (threadIdx.x == 0) sink[blockIdx.x] = checksum;
}

class Event {
 public:
  Event() { cudaEventCreate(&event_); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

template <class Launch>
Result<float> best_milliseconds(int repeats, Launch launch) {
  Event start, stop;
  float best = 0.0f;
  for (int r = -1; r < repeats; ++r) {  // r = -1 is the warm-up
    CUBEFORGE_TRY(cuda_status(cudaEventRecord(start.get()), "bandwidth probe: event record"));
    CUBEFORGE_TRY(launch());
    CUBEFORGE_TRY(cuda_status(cudaEventRecord(stop.get()), "bandwidth probe: event record"));
    CUBEFORGE_TRY(cuda_status(cudaEventSynchronize(stop.get()), "bandwidth probe: run"));
    float milliseconds = 0.0f;
    CUBEFORGE_TRY(cuda_status(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()), "bandwidth probe: timing"));
    if (r >= 0 && (best == 0.0f || milliseconds < best)) best = milliseconds;
  }
  return best;
}

}  // namespace

Result<BandwidthReport> measure_device_bandwidth(std::size_t bytes, int repeats) {
  if (bytes < (std::size_t(1) << 20) || repeats < 1)
    return invalid("measure_device_bandwidth: need at least 1 MiB and one repeat");
  bytes = bytes / 16 * 16;
  CUBEFORGE_ASSIGN_OR_RETURN(auto source, DeviceBuffer<uint4>::allocate(bytes / 16, "bandwidth source"));
  CUBEFORGE_ASSIGN_OR_RETURN(auto destination, DeviceBuffer<uint4>::allocate(bytes / 16, "bandwidth destination"));
  CUBEFORGE_TRY(source.fill_bytes(0x5a));

  int multiprocessors = multiprocessor_count();
  const int blocks = multiprocessors * 8;
  CUBEFORGE_ASSIGN_OR_RETURN(auto sink, DeviceBuffer<uint32_t>::allocate(blocks, "bandwidth sink"));

  BandwidthReport report;
  report.bytes = bytes;
  CUBEFORGE_ASSIGN_OR_RETURN(float copy_ms, best_milliseconds(repeats, [&]() -> Status {
    return cuda_status(cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice),
                       "bandwidth probe: copy");
  }));
  const uint4* source_words = source.data();
  uint32_t* sink_words = sink.data();
  const std::size_t words = bytes / 16;
  CUBEFORGE_ASSIGN_OR_RETURN(float read_ms, best_milliseconds(repeats, [&]() -> Status {
    read_kernel<<<blocks, kReadThreads>>>(source_words, words, sink_words);
    return launch_status("bandwidth probe: read kernel");
  }));
  report.copy_gb_per_s = 2.0 * double(bytes) / (double(copy_ms) * 1e-3) / 1e9;
  report.read_gb_per_s = double(bytes) / (double(read_ms) * 1e-3) / 1e9;
  return report;
}

}  // namespace cubeforge::cuda
