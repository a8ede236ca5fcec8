// Device memory bandwidth probe: the ceiling that decode benchmarks report
// their fraction of (decode reads each weight byte once per token).
//
// copy: cudaMemcpyAsync device→device, counted as bytes read + bytes written.
// read: a streaming kernel that reads the buffer with 16-byte loads and keeps
//   only a checksum, counted as bytes read; this is the figure that matches a
//   matvec's access pattern.
// Each is the best of `repeats` timed passes after one warm-up (CUDA events).
#pragma once

#include <cstddef>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

struct BandwidthReport {
  std::size_t bytes = 0;          // buffer size
  double copy_gb_per_s = 0.0;     // (read + write) / time, 1 GB = 1e9 bytes
  double read_gb_per_s = 0.0;     // read / time
};

Result<BandwidthReport> measure_device_bandwidth(std::size_t bytes = std::size_t(1) << 30, int repeats = 10);

}  // namespace cubeforge::cuda
