// LayerNorm rows and the fused per-head RMSNorm + RoPE + KV-cache write (see
// norm.h for the contracts).
//
// Both are tiny latency-bound kernels at decode (two rows of 1536, 24 heads);
// what matters is one launch instead of several and no extra round trip
// through device memory, not throughput. The arithmetic mirrors PyTorch's
// float32 order (x·rsqrt then ·weight; complex product without FMA
// contraction) so CPU references agree to a few ulp.
#include <algorithm>
#include <cmath>

#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/head_norm_rope.cuh"
#include "inference/cuda/norm.h"

namespace cubeforge::cuda {
namespace {

using namespace detail;

constexpr int kLayerNormThreads = 256;

__global__ void __launch_bounds__(kLayerNormThreads)
    layer_norm_kernel(const float* input, int input_stride, float* output, int output_stride, int cols, float eps) {
  __shared__ float scratch[kWarpSize];
  const float* x = input + size_t(blockIdx.x) * input_stride;
  float* y = output + size_t(blockIdx.x) * output_stride;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += x[i];
  const float mean = block_sum(sum, scratch) / float(cols);
  float squares = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float centred = x[i] - mean;
    squares = fmaf(centred, centred, squares);
  }
  const float variance = block_sum(squares, scratch) / float(cols);
  const float inverse_std = 1.0f / sqrtf(variance + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) y[i] = (x[i] - mean) * inverse_std;
}

struct QkParams {
  const float* query;
  int query_stride;
  const float* key;
  int key_stride;
  const float* value;
  int value_stride;
  const float* query_norm_weight;
  const float* key_norm_weight;
  float eps;
  float rope_theta;
  int tokens;
  const int* position;
  int first_position;
  int position_step;
  int cache_slot_offset;
  float* query_out;
  void* key_cache;
  void* value_cache;
  int cache_capacity;
  int heads;
  int head_dim;
};

// Grid (heads, batch, tokens), two warps: warp 0 the query, warp 1 the key and value.
// Lane l owns the interleaved pairs l, l + 32, … of the head; P covers the
// head size (with_padded_head_dim).
template <int P, class Cache>
__global__ void __launch_bounds__(64) qk_norm_rope_kernel(const QkParams p) {
  constexpr int kPairsPerLane = (P / 2 + kWarpSize - 1) / kWarpSize;
  const int D = p.head_dim, pairs = D / 2;
  const int head = blockIdx.x;
  const int batch_row = blockIdx.y;
  const int token = blockIdx.z;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const bool is_query = warp == 0;
  if (is_query && p.query == nullptr) return;  // warp-uniform

  const int first = p.position ? *p.position : p.first_position;
  const int position = p.position ? first + token : first + token * p.position_step;
  const int slot = first + p.cache_slot_offset + token;
  const bool slot_in_cache = slot >= 0 && slot < p.cache_capacity;
  const size_t head_in_cache = (size_t(batch_row) * p.heads + head) * size_t(p.cache_capacity);
  const size_t row = size_t(batch_row) * p.tokens + token;

  if (is_query) {
    float* out = p.query_out + (row * p.heads + head) * D;
    norm_rotate_head<P>(p.query + row * p.query_stride + head * D, p.query_norm_weight, p.eps, p.rope_theta, position,
                        D, [&](int j, float x, float y) { *reinterpret_cast<float2*>(out + 2 * j) = make_float2(x, y); });
    return;
  }
  Cache* keys = static_cast<Cache*>(p.key_cache);
  norm_rotate_head<P>(p.key + row * p.key_stride + head * D, p.key_norm_weight, p.eps, p.rope_theta, position, D,
                      [&](int j, float x, float y) {
                        if (slot_in_cache) store_pair(keys, (head_in_cache + slot) * D + 2 * j, x, y);
                      });
  if (slot_in_cache) {
    const float2* value = reinterpret_cast<const float2*>(p.value + row * p.value_stride + head * D);
#pragma unroll
    for (int t = 0; t < kPairsPerLane; ++t) {
      const int j = lane + t * kWarpSize;
      if (j >= pairs) continue;
      const float2 v = value[j];
      store_pair(static_cast<Cache*>(p.value_cache), (head_in_cache + slot) * D + 2 * j, v.x, v.y);
    }
  }
}

template <class Cache>
Status launch_qk(int head_dim, dim3 grid, const QkParams& params, Stream stream) {
  return with_padded_head_dim(head_dim, "qk_norm_rope_cache_write", [&](auto padded) {
    qk_norm_rope_kernel<decltype(padded)::value, Cache><<<grid, 64, 0, stream>>>(params);
    return launch_status("qk_norm_rope_cache_write kernel launch");
  });
}

}  // namespace

std::vector<float> rope_inverse_frequencies(int head_dim, float theta) {
  std::vector<float> frequencies(head_dim / 2);
  for (int j = 0; j < head_dim / 2; ++j)
    frequencies[j] = float(1.0 / std::pow(double(theta), double(2 * j) / double(head_dim)));
  return frequencies;
}

Status layer_norm_rows(const float* input, int input_stride, float* output, int output_stride, int rows, int cols,
                       float eps, Stream stream) {
  if (rows <= 0 || cols <= 0) return invalid("layer_norm_rows: empty input " + std::to_string(rows) + "x" + std::to_string(cols));
  if (!input || !output) return invalid("layer_norm_rows: input and output are required");
  if (input_stride < cols || output_stride < cols) return invalid("layer_norm_rows: strides must cover a row");
  if (!(eps > 0.0f)) return invalid("layer_norm_rows: eps must be positive");
  // A narrow row takes a narrower block: no warps that only wait at the reductions.
  const int threads = std::min(kLayerNormThreads, (cols + kWarpSize - 1) / kWarpSize * kWarpSize);
  layer_norm_kernel<<<rows, threads, 0, stream>>>(input, input_stride, output, output_stride, cols, eps);
  return launch_status("layer_norm_rows kernel launch");
}

Status qk_norm_rope_cache_write(const QkNormRopeArgs& args, Stream stream) {
  const std::string where = "qk_norm_rope_cache_write: ";
  if (args.batch <= 0 || args.heads <= 0) return invalid(where + "batch and heads must be positive");
  if (args.tokens <= 0 || args.tokens > 65535) return invalid(where + "tokens must be in 1..65535");
  if (!args.key || !args.value || !args.key_norm_weight || !args.key_cache || !args.value_cache)
    return invalid(where + "key, value, key_norm_weight and both caches are required");
  if (args.query && (!args.query_out || !args.query_norm_weight))
    return invalid(where + "a query needs query_out and query_norm_weight");
  if (args.cache_type != DType::kBF16 && args.cache_type != DType::kF32)
    return invalid(where + "cache type must be BF16 or F32, got " + std::string(dtype_name(args.cache_type)));
  if (args.cache_capacity <= 0) return invalid(where + "cache_capacity must be positive");
  const int width = args.heads * args.head_dim;
  if (args.key_stride < width || args.value_stride < width || (args.query && args.query_stride < width))
    return invalid(where + "row strides must cover heads·head_dim = " + std::to_string(width));
  // Pairs are read and written as float2 / bf16x2.
  if ((args.key_stride | args.value_stride | args.query_stride) % 2 != 0 || !aligned(args.key, 8) ||
      !aligned(args.value, 8) || (args.query && (!aligned(args.query, 8) || !aligned(args.query_out, 8))) ||
      !aligned(args.key_cache, 8) || !aligned(args.value_cache, 8))
    return invalid(where + "rows and caches must be 8-byte aligned with even strides");
  if (!(args.rope_theta > 0.0f) || !(args.eps > 0.0f)) return invalid(where + "rope_theta and eps must be positive");

  QkParams params{};
  params.query = args.query;
  params.query_stride = args.query_stride;
  params.key = args.key;
  params.key_stride = args.key_stride;
  params.value = args.value;
  params.value_stride = args.value_stride;
  params.query_norm_weight = args.query_norm_weight;
  params.key_norm_weight = args.key_norm_weight;
  params.eps = args.eps;
  params.rope_theta = args.rope_theta;
  params.tokens = args.tokens;
  params.position = args.position;
  params.first_position = args.first_position;
  params.position_step = args.position_step;
  params.cache_slot_offset = args.cache_slot_offset;
  params.query_out = args.query_out;
  params.key_cache = args.key_cache;
  params.value_cache = args.value_cache;
  params.cache_capacity = args.cache_capacity;
  params.heads = args.heads;
  params.head_dim = args.head_dim;
  const dim3 grid(args.heads, args.batch, args.tokens);
  return args.cache_type == DType::kBF16 ? launch_qk<__nv_bfloat16>(args.head_dim, grid, params, stream)
                                         : launch_qk<float>(args.head_dim, grid, params, stream);
}

}  // namespace cubeforge::cuda
