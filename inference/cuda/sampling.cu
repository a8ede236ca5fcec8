// CFG combine, token choice and next-input gather in one block (see sampling.h).
//
// The vocabulary (≤ 16384) lives in registers, up to 16 contiguous tokens per
// thread of one block of up to 1024 threads (smaller vocabularies take a
// smaller block: fewer idle threads at every reduction). Thresholds for top-k and top-p are found by binary
// search over the bit patterns of floats (32 and 31 rounds of a block
// reduction) instead of a sort: every reduction combines in a fixed order, so
// a seed gives the same tokens on every run and in graph replay. Inverse-CDF
// sampling walks token order: thread t's interval is [prefix[t−1], prefix[t])
// from one shared array of inclusive prefix sums, so exactly one thread owns
// the target, and a target rounded onto the total falls back to the last
// kept token. The whole step costs one launch of a few microseconds (greedy)
// to a few tens (top-k + top-p), against ~0.4 ms of weight streaming.
#include <climits>
#include <cmath>

#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/sampling.h"

namespace cubeforge::cuda {
namespace {

using namespace detail;

constexpr int kMaxThreads = 1024;
constexpr uint32_t kOneBits = 0x3F800000u;  // 1.0f: the weight of the maximum logit

struct SampleParams {
  const float* logits;
  int logits_stride;
  int rows;
  int vocab;
  float guidance_scale;
  int total_steps;
  int* step;
  bool advance_step;
  bool greedy;
  float temperature;
  int top_k;
  float top_p;
  uint64_t seed;
  int* tokens;
  int* host_ring;
  int host_ring_capacity;
  int* host_ring_count;
  const int* forced_tokens;
  int* input_tokens;
  bool embedding_bf16;
  const void* embedding;
  int embedding_dim;
  float* next_input;
  int next_input_stride;
  int next_input_rows;
  float* combined_logits;
  float* logits_history;
  float* combined_history;
};

// Float order as unsigned order (negative floats reversed).
__device__ __forceinline__ uint32_t ordered_key(float value) {
  const uint32_t bits = __float_as_uint(value);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ int block_sum_int(int value, int* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(kFullMask, value, offset);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  int total = lane < int(blockDim.x) / kWarpSize ? scratch[lane] : 0;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(kFullMask, total, offset);
  __syncthreads();
  return total;
}

__device__ __forceinline__ int block_max_int(int value, int* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = max(value, __shfl_xor_sync(kFullMask, value, offset));
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  int total = lane < int(blockDim.x) / kWarpSize ? scratch[lane] : INT_MIN;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) total = max(total, __shfl_xor_sync(kFullMask, total, offset));
  __syncthreads();
  return total;
}

// (value, index) of the maximum; ties go to the lower index, as torch.argmax.
__device__ __forceinline__ void block_argmax(float& value, int& index, float* value_scratch, int* index_scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  auto fold = [&](float other_value, int other_index) {
    if (other_value > value || (other_value == value && other_index < index)) value = other_value, index = other_index;
  };
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_value = __shfl_xor_sync(kFullMask, value, offset);
    const int other_index = __shfl_xor_sync(kFullMask, index, offset);
    fold(other_value, other_index);
  }
  if (lane == 0) value_scratch[warp] = value, index_scratch[warp] = index;
  __syncthreads();
  const bool filled = lane < int(blockDim.x) / kWarpSize;
  value = filled ? value_scratch[lane] : -INFINITY;
  index = filled ? index_scratch[lane] : 0x7fffffff;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_value = __shfl_xor_sync(kFullMask, value, offset);
    const int other_index = __shfl_xor_sync(kFullMask, index, offset);
    fold(other_value, other_index);
  }
  __syncthreads();
}

template <int Threads, int PerThread>
__global__ void __launch_bounds__(Threads) sample_kernel(const SampleParams p) {
  constexpr int kThreads = Threads;
  __shared__ float float_scratch[kWarpSize];
  __shared__ int int_scratch[kWarpSize];
  __shared__ float inclusive_prefix[kThreads];
  __shared__ int chosen;

  const int step = *p.step;
  const int first = threadIdx.x * PerThread;

  // 1. Combined logits; entries past the vocabulary are -inf and never chosen.
  float logit[PerThread];
  {
    const double gamma = double(p.guidance_scale) * double(p.total_steps - step) / double(p.total_steps);
    const float conditional_weight = float(1.0 + gamma);
    const float unconditional_weight = float(gamma);
#pragma unroll
    for (int j = 0; j < PerThread; ++j) {
      const int token = first + j;
      float value = -INFINITY;
      if (token < p.vocab) {
        value = p.logits[token];
        if (p.rows == 2)
          value = __fsub_rn(__fmul_rn(conditional_weight, value),
                            __fmul_rn(unconditional_weight, p.logits[p.logits_stride + token]));
        if (p.combined_logits) p.combined_logits[token] = value;
        if (p.combined_history) p.combined_history[size_t(step) * p.vocab + token] = value;
        if (isnan(value)) value = -INFINITY;
      }
      logit[j] = value;
    }
  }

  if (p.logits_history) {
    float* history = p.logits_history + size_t(step) * p.rows * p.logits_stride;
    for (int i = threadIdx.x; i < p.rows * p.logits_stride; i += kThreads) history[i] = p.logits[i];
  }

  // 2. Maximum (greedy answer, and the reference point of the weights).
  float max_logit = -INFINITY;
  int argmax = 0x7fffffff;
#pragma unroll
  for (int j = 0; j < PerThread; ++j)
    if (first + j < p.vocab && (logit[j] > max_logit || argmax == 0x7fffffff)) max_logit = logit[j], argmax = first + j;
  block_argmax(max_logit, argmax, float_scratch, int_scratch);

  if (p.greedy) {
    if (threadIdx.x == 0) chosen = argmax;
  } else {
    const float temperature = fmaxf(p.temperature, 1e-6f);
    float weight[PerThread];
#pragma unroll
    for (int j = 0; j < PerThread; ++j)
      weight[j] = (first + j < p.vocab && logit[j] != -INFINITY) ? expf((logit[j] - max_logit) / temperature) : 0.0f;

    if (p.top_k > 0 && p.top_k < p.vocab) {
      // Largest key K with count(key ≥ K) ≥ k: the k-th largest logit.
      uint32_t low = 0, high = 0xffffffffu;
      while (low < high) {
        const uint32_t middle = low + uint32_t((uint64_t(high) - low + 1) / 2);
        int count = 0;
#pragma unroll
        for (int j = 0; j < PerThread; ++j) count += (first + j < p.vocab && ordered_key(logit[j]) >= middle) ? 1 : 0;
        if (block_sum_int(count, int_scratch) >= p.top_k) low = middle;
        else high = middle - 1;
      }
#pragma unroll
      for (int j = 0; j < PerThread; ++j)
        if (ordered_key(logit[j]) < low) weight[j] = 0.0f;
    }

    if (p.top_p < 1.0f) {
      float local = 0.0f;
#pragma unroll
      for (int j = 0; j < PerThread; ++j) local += weight[j];
      const float limit = p.top_p * block_sum(local, float_scratch);
      // Largest weight bit pattern T with mass(w ≥ T) ≥ limit (weights are ≥ 0,
      // so bit order is value order): the weight at which the mass of the most
      // likely tokens first reaches p. mass(0) = total ≥ limit; mass(+inf) = 0.
      uint32_t low = 0, high = 0x7F800000u;
      while (low < high) {
        const uint32_t middle = low + (high - low + 1) / 2;
        float mass = 0.0f;
#pragma unroll
        for (int j = 0; j < PerThread; ++j)
          if (weight[j] > 0.0f && __float_as_uint(weight[j]) >= middle) mass += weight[j];
        if (block_sum(mass, float_scratch) >= limit) low = middle;
        else high = middle - 1;
      }
      const uint32_t threshold = min(low, kOneBits);  // the maximum always stays
#pragma unroll
      for (int j = 0; j < PerThread; ++j)
        if (__float_as_uint(weight[j]) < threshold) weight[j] = 0.0f;
    }

    // Inclusive prefix of the per-thread sums in token order.
    float local = 0.0f;
    int last_kept = -1;
#pragma unroll
    for (int j = 0; j < PerThread; ++j) {
      local += weight[j];
      if (weight[j] > 0.0f) last_kept = first + j;
    }
    {
      const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
      float scan = local;
#pragma unroll
      for (int offset = 1; offset < kWarpSize; offset <<= 1) {
        const float other = __shfl_up_sync(kFullMask, scan, offset);
        if (lane >= offset) scan += other;
      }
      if (lane == kWarpSize - 1) float_scratch[warp] = scan;
      __syncthreads();
      if (warp == 0) {
        float total = lane < kThreads / kWarpSize ? float_scratch[lane] : 0.0f;
#pragma unroll
        for (int offset = 1; offset < kWarpSize; offset <<= 1) {
          const float other = __shfl_up_sync(kFullMask, total, offset);
          if (lane >= offset) total += other;
        }
        float_scratch[lane] = total;  // inclusive over warps
      }
      __syncthreads();
      inclusive_prefix[threadIdx.x] = scan + (warp > 0 ? float_scratch[warp - 1] : 0.0f);
      if (threadIdx.x == 0) chosen = -1;
      __syncthreads();
    }
    const int fallback = block_max_int(last_kept, int_scratch);
    const float total = inclusive_prefix[kThreads - 1];
    const float target = sampling_uniform(p.seed, step) * total;
    const float begin = threadIdx.x > 0 ? inclusive_prefix[threadIdx.x - 1] : 0.0f;
    const float end = inclusive_prefix[threadIdx.x];
    if (target >= begin && target < end) {
      float running = begin;
      int pick = -1, last = -1;
#pragma unroll
      for (int j = 0; j < PerThread; ++j) {
        if (weight[j] > 0.0f) {
          last = j;
          running += weight[j];
          if (pick < 0 && target < running) pick = j;
        }
      }
      chosen = first + (pick >= 0 ? pick : last);
    }
    __syncthreads();
    if (threadIdx.x == 0 && chosen < 0) chosen = fallback >= 0 ? fallback : argmax;  // all weights zero: greedy
  }
  __syncthreads();
  const int token = chosen;
  const int fed = p.forced_tokens ? p.forced_tokens[step] : token;

  // 3. Publish the token and feed it to the next step.
  if (threadIdx.x == 0) {
    if (p.tokens) p.tokens[step] = token;
    if (p.input_tokens) p.input_tokens[step + 1] = fed;
    if (p.host_ring) {
      *reinterpret_cast<volatile int*>(p.host_ring + step % p.host_ring_capacity) = token;
      __threadfence_system();
      if (p.host_ring_count) *reinterpret_cast<volatile int*>(p.host_ring_count) = step + 1;
    }
    if (p.advance_step) *p.step = step + 1;
  }
  if (p.embedding && p.next_input) {
    for (int d = threadIdx.x; d < p.embedding_dim; d += kThreads) {
      const size_t at = size_t(fed) * p.embedding_dim + d;
      const float value = p.embedding_bf16
                              ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.embedding)[at])
                              : static_cast<const float*>(p.embedding)[at];
      for (int row = 0; row < p.next_input_rows; ++row) p.next_input[size_t(row) * p.next_input_stride + d] = value;
    }
  }
}

}  // namespace

Status cfg_sample_and_embed(const CfgSampleArgs& args, Stream stream) {
  const std::string where = "cfg_sample_and_embed: ";
  if (!args.logits || !args.step) return invalid(where + "logits and step are required");
  if (args.rows != 1 && args.rows != 2) return invalid(where + "rows must be 1 or 2, got " + std::to_string(args.rows));
  if (args.vocab <= 0 || args.vocab > kMaxSamplingVocab)
    return make_error(ErrorCode::kUnsupported, where + "vocab " + std::to_string(args.vocab) + " outside 1.." +
                                                   std::to_string(kMaxSamplingVocab));
  const int logits_stride = args.logits_stride ? args.logits_stride : args.vocab;
  if (logits_stride < args.vocab) return invalid(where + "logits_stride must be at least vocab");
  if (args.total_steps <= 0) return invalid(where + "total_steps must be positive");
  if (args.host_ring && args.host_ring_capacity <= 0) return invalid(where + "a host ring needs a positive capacity");
  if (args.host_ring_count && !args.host_ring) return invalid(where + "host_ring_count without host_ring");
  if (args.embedding) {
    if (args.embedding_type != DType::kBF16 && args.embedding_type != DType::kF32)
      return invalid(where + "embedding type must be BF16 or F32");
    if (args.embedding_dim <= 0 || !args.next_input || args.next_input_rows <= 0 ||
        args.next_input_stride < args.embedding_dim)
      return invalid(where + "an embedding needs embedding_dim, next_input, next_input_rows and a covering stride");
  }
  const cubeforge::SamplingOptions& s = args.sampling;
  if (!s.greedy && (!std::isfinite(s.temperature) || s.top_k < 0 || !(s.top_p > 0.0f)))
    return invalid(where + "temperature must be finite, top_k ≥ 0 and top_p > 0");

  SampleParams params{};
  params.logits = args.logits;
  params.logits_stride = logits_stride;
  params.rows = args.rows;
  params.vocab = args.vocab;
  params.guidance_scale = args.guidance_scale;
  params.total_steps = args.total_steps;
  params.step = args.step;
  params.advance_step = args.advance_step;
  params.greedy = s.greedy;
  params.temperature = s.temperature;
  params.top_k = s.top_k;
  params.top_p = s.top_p;
  params.seed = s.seed;
  params.tokens = args.tokens;
  params.host_ring = args.host_ring;
  params.host_ring_capacity = args.host_ring_capacity;
  params.host_ring_count = args.host_ring_count;
  params.forced_tokens = args.forced_tokens;
  params.input_tokens = args.input_tokens;
  params.embedding_bf16 = args.embedding_type == DType::kBF16;
  params.embedding = args.embedding;
  params.embedding_dim = args.embedding_dim;
  params.next_input = args.next_input;
  params.next_input_stride = args.next_input_stride;
  params.next_input_rows = args.next_input_rows;
  params.combined_logits = args.combined_logits;
  params.logits_history = args.logits_history;
  params.combined_history = args.combined_history;

  if (args.vocab <= 4 * 128) sample_kernel<128, 4><<<1, 128, 0, stream>>>(params);
  else if (args.vocab <= 4 * 256) sample_kernel<256, 4><<<1, 256, 0, stream>>>(params);
  else if (args.vocab <= 4 * kMaxThreads) sample_kernel<kMaxThreads, 4><<<1, kMaxThreads, 0, stream>>>(params);
  else if (args.vocab <= 8 * kMaxThreads) sample_kernel<kMaxThreads, 8><<<1, kMaxThreads, 0, stream>>>(params);
  else sample_kernel<kMaxThreads, 16><<<1, kMaxThreads, 0, stream>>>(params);
  return launch_status("cfg_sample_and_embed kernel launch");
}

}  // namespace cubeforge::cuda
