// Helpers shared by the kernel families' .cu files (never included by plain C++):
// turning runtime errors into Status values, launch checks, bf16 widening, and
// deterministic warp/block reductions.
//
// Reductions here always combine in a fixed order (butterfly shuffles, then one
// warp over the per-warp results), so a kernel gives bit-identical results from
// run to run; graph replay is compared bit for bit against eager launches.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "inference/cuda/cuda_api.h"
#include "inference/cuda/cuda_status.h"

namespace cubeforge::cuda::detail {

// Counts one kernel launch (kernel_launches() in cuda_api.h).
void count_launch();

// After a kernel launch: reports a bad configuration (grid, shared memory,
// missing sm_90 image) as an error naming the kernel family.
inline Status launch_status(const char* kernel) {
  count_launch();
  return cuda_status(cudaGetLastError(), kernel);
}

inline Error invalid(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}

inline bool aligned(const void* pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// Calls launch(std::integral_constant<int, P>{}) with P the power of two
// from 16 to 256 that covers head_dim (the size the kernels are built for;
// they run head_dim itself with the lanes past it idle), or returns an
// error naming `what` when head_dim_supported (cuda_api.h) refuses it.
template <class Launch>
Status with_padded_head_dim(int head_dim, const std::string& what, Launch&& launch) {
  if (!head_dim_supported(head_dim))
    return invalid(what + ": head_dim must be " + supported_head_dims() + ", got " + std::to_string(head_dim));
  if (head_dim <= 16) return launch(std::integral_constant<int, 16>{});
  if (head_dim <= 32) return launch(std::integral_constant<int, 32>{});
  if (head_dim <= 64) return launch(std::integral_constant<int, 64>{});
  if (head_dim <= 128) return launch(std::integral_constant<int, 128>{});
  static_assert(kMaxHeadDim == 256, "with_padded_head_dim covers head sizes up to 256");
  return launch(std::integral_constant<int, 256>{});
}

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Two bf16 packed in one 32-bit word, element 2i in the low half (little endian).
__device__ __forceinline__ float bf16_low(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_high(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

// f32_to_bf16 (inference/tensor/dtype.h) bit for bit: round to nearest even,
// a NaN stays a NaN with its sign and top payload bits (quieted), where the
// hardware's conversion would give the canonical NaN.
__device__ __forceinline__ uint16_t bf16_from_f32(float value) {
  uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// An IEEE half's bits (the quantised weights' scales and offsets) as f32, exactly.
__device__ __forceinline__ float f16_bits_to_float(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24
    const float magnitude = float(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// Sum over the block, returned to every thread. `scratch` holds 32 floats;
// blockDim.x must be a multiple of 32. Contains two __syncthreads.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_sum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  total = warp_sum(total);
  __syncthreads();  // scratch may be reused by the caller's next reduction
  return total;
}

}  // namespace cubeforge::cuda::detail
