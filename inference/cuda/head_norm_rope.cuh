// One attention head's per-head RMSNorm and interleaved RoPE, by one warp:
// the arithmetic that qk_norm_rope_cache_write (norm.cu) and the fused
// decode attention (attention.cu) share, so both give the same bits.
//
//   y = RMSNorm(x) · weight = x · (1 / sqrt(mean(x²) + eps)) · weight
//   (y[2j], y[2j+1]) rotated by position · θ^(−2j/D)
//
// Lane l handles the pairs l, l + 32, …; `emit(j, x, y)` receives rotated
// pair j. Products are rounded one at a time, without FMA contraction, as
// PyTorch computes them in float32.
#pragma once

#include "inference/cuda/cuda_internal.cuh"

namespace cubeforge::cuda::detail {

// P is the power of two the kernel is built for (with_padded_head_dim),
// head_dim ≤ P the head's size.
template <int P, class Emit>
__device__ __forceinline__ void norm_rotate_head(const float* source, const float* weight, float eps, float theta,
                                                 int position, int head_dim, Emit&& emit) {
  constexpr int kPairsPerLane = (P / 2 + kWarpSize - 1) / kWarpSize;
  const int pairs = head_dim / 2;
  const int lane = threadIdx.x % kWarpSize;
  float2 pair[kPairsPerLane];
  float squares = 0.0f;
#pragma unroll
  for (int t = 0; t < kPairsPerLane; ++t) {
    const int j = lane + t * kWarpSize;
    pair[t] = j < pairs ? reinterpret_cast<const float2*>(source)[j] : make_float2(0.0f, 0.0f);
    squares = fmaf(pair[t].x, pair[t].x, squares);
    squares = fmaf(pair[t].y, pair[t].y, squares);
  }
  squares = warp_sum(squares);
  const float inverse_rms = 1.0f / sqrtf(squares / float(head_dim) + eps);
#pragma unroll
  for (int t = 0; t < kPairsPerLane; ++t) {
    const int j = lane + t * kWarpSize;
    if (j >= pairs) continue;
    const float a = __fmul_rn(__fmul_rn(pair[t].x, inverse_rms), weight[2 * j]);
    const float b = __fmul_rn(__fmul_rn(pair[t].y, inverse_rms), weight[2 * j + 1]);
    const float inverse_frequency = float(1.0 / pow(double(theta), double(2 * j) / double(head_dim)));
    const float angle = __fmul_rn(float(position), inverse_frequency);
    float sine, cosine;
    sincosf(angle, &sine, &cosine);
    emit(j, __fsub_rn(__fmul_rn(a, cosine), __fmul_rn(b, sine)), __fadd_rn(__fmul_rn(a, sine), __fmul_rn(b, cosine)));
  }
}

template <class Cache>
__device__ __forceinline__ void store_pair(Cache* cache, size_t at, float x, float y);

template <>
__device__ __forceinline__ void store_pair<float>(float* cache, size_t at, float x, float y) {
  *reinterpret_cast<float2*>(cache + at) = make_float2(x, y);
}

template <>
__device__ __forceinline__ void store_pair<__nv_bfloat16>(__nv_bfloat16* cache, size_t at, float x, float y) {
  // The CPU's rounding (bf16_from_f32), so a bf16 cache holds the bits the CPU's would.
  *reinterpret_cast<uint32_t*>(cache + at) = uint32_t(bf16_from_f32(x)) | (uint32_t(bf16_from_f32(y)) << 16);
}

}  // namespace cubeforge::cuda::detail
