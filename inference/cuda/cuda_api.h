// Types shared by every CUDA kernel-family header, spelled so that plain C++
// translation units can include those headers without the CUDA toolkit's.
//
// A stream is the runtime's opaque `CUstream_st*` (the same type as
// `cudaStream_t`); nullptr means the legacy default stream. Device buffers are
// passed as typed raw pointers with their sizes alongside; half-precision
// buffers are `uint16_t` bit patterns (bf16), as the safetensors reader hands
// them out. Every entry point validates its arguments on the host and returns a
// Status; kernels themselves never fail.
#pragma once

#include <cstdint>
#include <string>

#include "inference/core/result.h"
#include "inference/tensor/dtype.h"

struct CUstream_st;

namespace cubeforge::cuda {

using Stream = CUstream_st*;

// Head sizes the attention, RoPE and KV-store kernels run (and so the KV
// ranks, a rank being the size of the one latent head): the multiples of 16
// from 16 to 256, as llama.cpp's kernels cover 64 to 256. Kernels are built
// for the powers of two up to 256 and run a size between them with the lanes
// past it idle. The backend's supports() (token_backend.h) asks this; code
// above the seam asks supports().
constexpr int kHeadDimStep = 16;
constexpr int kMaxHeadDim = 256;
constexpr bool head_dim_supported(int head_dim) {
  return head_dim >= kHeadDimStep && head_dim <= kMaxHeadDim && head_dim % kHeadDimStep == 0;
}
// "a multiple of 16 from 16 to 256", for messages.
std::string supported_head_dims();

// Number of CUDA devices the runtime sees; 0 when there is no driver, no device,
// or the runtime reports any error (a machine without a GPU is not an error).
int device_count();

// "NVIDIA H200, compute 9.0, 132 SMs, 139.8 GiB" for device 0, or why there is none.
std::string device_summary();

// Multiprocessor count of the current device (cached per device); 1 when unknown.
int multiprocessor_count();

// Kernel launches made through the families' entry points so far in this
// process (benchmarks count a decode step's launches with it).
long long kernel_launches();

}  // namespace cubeforge::cuda
