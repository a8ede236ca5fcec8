// The store of f32 rows into a bf16, fp8 or int8 KV cache (see kv_cache.h): one
// warp per (batch row, head) walks the slots in order, as cpu::kv_store is
// called slot by slot, so an int8 block that fills is quantised from the
// residual exactly when the CPU's is. It runs at prefill (the condition and
// BOS, a few dozen slots); the decode step stores its one slot in the
// attention kernel's prologue with the same device functions (kv_store.cuh).
#include <algorithm>
#include <climits>
#include <cmath>

#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/kv_cache.h"
#include "inference/cuda/kv_store.cuh"

namespace cubeforge::cuda {
namespace {

using namespace detail;

struct StoreParams {
  const float* source_keys;
  const float* source_values;
  int source_capacity;
  int first_slot;
  int count;
  void* key_cache;
  void* value_cache;
  KvCacheScales scales;
  int cache_capacity;
  int heads;
  int head_dim;
};

// Grid (heads, batch), one warp; P covers the head size (with_padded_head_dim).
template <int P, KvCacheForm Form>
__global__ void __launch_bounds__(kWarpSize) kv_store_kernel(const StoreParams p) {
  const int row_head = blockIdx.y * p.heads + blockIdx.x, D = p.head_dim;
  const KvHead head = kv_head(p.key_cache, p.value_cache, p.scales, Form, row_head, p.cache_capacity, D);
  const size_t source = size_t(row_head) * p.source_capacity;
  for (int slot = p.first_slot; slot < p.first_slot + p.count; ++slot)
    store_slot<P, Form>(head, slot, p.source_keys + (source + slot) * D, p.source_values + (source + slot) * D, D);
}

template <KvCacheForm Form>
Status launch_store(int head_dim, dim3 grid, const StoreParams& params, Stream stream) {
  return with_padded_head_dim(head_dim, "kv_cache_store", [&](auto padded) {
    kv_store_kernel<decltype(padded)::value, Form><<<grid, kWarpSize, 0, stream>>>(params);
    return launch_status("kv_cache_store kernel launch");
  });
}

// Low-rank keys and values: grid (batch), kLowRankThreads threads, one
// latent element per thread (two for ranks over 128), the slots in order (an
// int8 block fills in order).
constexpr int kLowRankThreads = 128;

struct LowRankStoreParams {
  const float* source_keys;
  const float* source_values;
  int source_capacity;
  int heads;
  int head_dim;
  int rank;
  const float* key_basis;
  const float* value_basis;
  int first_slot;
  int count;
  const int* position;
  int slot_offset;
  void* key_cache;
  void* value_cache;
  KvCacheScales scales;
  int cache_capacity;
};

// P covers the rank (with_padded_head_dim: a rank is the latent head's size).
template <int P, KvCacheForm Form>
__global__ void __launch_bounds__(kLowRankThreads) low_rank_store_kernel(const LowRankStoreParams p) {
  __shared__ float latent_key[P];
  __shared__ float latent_value[P];
  const int row = blockIdx.x, D = p.head_dim, R = p.rank, width = p.heads * p.head_dim;
  const int first = p.position ? *p.position + p.slot_offset : p.first_slot;
  const int count = p.position ? 1 : p.count;
  for (int slot = first; slot < first + count; ++slot) {
    if (slot < 0 || slot >= p.cache_capacity || slot >= p.source_capacity) continue;
    for (int i = threadIdx.x; i < R; i += kLowRankThreads) {
      // cpu::linear's row: the source row's elements in width order.
      const float* key_row = p.key_basis + size_t(i) * width;
      const float* value_row = p.value_basis + size_t(i) * width;
      float key = 0.0f, value = 0.0f;
      for (int h = 0; h < p.heads; ++h) {
        const size_t at = ((size_t(row) * p.heads + h) * p.source_capacity + slot) * D;
        for (int d = 0; d < D; ++d) {
          key += key_row[h * D + d] * p.source_keys[at + d];
          value += value_row[h * D + d] * p.source_values[at + d];
        }
      }
      latent_key[i] = key;
      latent_value[i] = value;
    }
    __syncthreads();
    if constexpr (Form == KvCacheForm::kF32) {
      for (int i = threadIdx.x; i < R; i += kLowRankThreads) {
        const size_t at = (size_t(row) * p.cache_capacity + slot) * R + i;
        static_cast<float*>(p.key_cache)[at] = latent_key[i];
        static_cast<float*>(p.value_cache)[at] = latent_value[i];
      }
    } else if (threadIdx.x < kWarpSize) {
      const KvHead head = kv_head(p.key_cache, p.value_cache, p.scales, Form, row, p.cache_capacity, R);
      store_slot<P, Form>(head, slot, latent_key, latent_value, R);
    }
    __syncthreads();  // the latents are rewritten for the next slot
  }
}

template <KvCacheForm Form>
Status launch_low_rank_store(int rank, int batch, const LowRankStoreParams& params, Stream stream) {
  return with_padded_head_dim(rank, "low_rank_kv_store (the rank is the latent head's size)", [&](auto padded) {
    low_rank_store_kernel<decltype(padded)::value, Form><<<batch, kLowRankThreads, 0, stream>>>(params);
    return launch_status("low_rank_kv_store kernel launch");
  });
}

struct ProjectHeadsParams {
  int batch, heads, rows, cols;
  const float* weights;
  const float* input;
  float* output;
};

__global__ void __launch_bounds__(kLowRankThreads) project_heads_kernel(const ProjectHeadsParams p) {
  const int total = p.batch * p.heads * p.rows;
  for (int index = blockIdx.x * blockDim.x + threadIdx.x; index < total; index += gridDim.x * blockDim.x) {
    const int i = index % p.rows, h = (index / p.rows) % p.heads, b = index / (p.rows * p.heads);
    const float* weight = p.weights + (size_t(h) * p.rows + i) * p.cols;
    const float* x = p.input + (size_t(b) * p.heads + h) * p.cols;
    float sum = 0.0f;
    for (int j = 0; j < p.cols; ++j) sum += weight[j] * x[j];
    p.output[(size_t(b) * p.heads + h) * p.rows + i] = sum;
  }
}

constexpr int kEncodeThreads = 256;

__global__ void __launch_bounds__(kEncodeThreads) fp8_encode_kernel(const float* input, uint8_t* output, int count) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    output[i] = fp8_e4m3_from_f32(input[i]);
}

constexpr int kBudgetThreads = 256;

struct BudgetParams {
  int heads;
  int capacity;
  int fixed_slots;
  int recent;
  const int* position;
  const float* scores;
  float* attention;
  int* slot_positions;
  int* write_slots;
};

// The smaller (value, slot), the lower slot among equal values: the CPU's
// strict `<` while it walks the slots in order.
template <class T>
__device__ __forceinline__ void keep_least(T& value, int& slot, T other_value, int other_slot) {
  if (other_value < value || (other_value == value && other_slot < slot)) value = other_value, slot = other_slot;
}

// keep_least over the block, returned to every thread; `values` and `slots`
// hold 32 entries. blockDim.x is a multiple of 32.
template <class T>
__device__ __forceinline__ void block_least(T& value, int& slot, T* values, int* slots) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    keep_least(value, slot, __shfl_xor_sync(kFullMask, value, offset), __shfl_xor_sync(kFullMask, slot, offset));
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) values[warp] = value, slots[warp] = slot;
  __syncthreads();
  for (int w = 0; w < int(blockDim.x / kWarpSize); ++w) keep_least(value, slot, values[w], slots[w]);
  __syncthreads();  // the scratch may be reused
}

__device__ __forceinline__ float budget_block_max(float value, float* scratch) {
  value = warp_max(value);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float largest = -INFINITY;
  for (int w = 0; w < int(blockDim.x / kWarpSize); ++w) largest = fmaxf(largest, scratch[w]);
  __syncthreads();
  return largest;
}

// Grid (batch): one block per batch row (see kv_budget_update).
__global__ void __launch_bounds__(kBudgetThreads) kv_budget_kernel(const BudgetParams p) {
  __shared__ float float_scratch[kWarpSize];
  __shared__ int int_scratch[kWarpSize];
  __shared__ int slot_scratch[kWarpSize];
  const int row = blockIdx.x, C = p.capacity;
  const int position = *p.position;
  float* attention = p.attention + size_t(row) * C;
  int* positions = p.slot_positions + size_t(row) * C;
  if (p.scores) {
    // LayerKvCache::append: the written slot holds the new position, with no attention yet.
    if (threadIdx.x == 0) {
      const int written = p.write_slots[row];
      positions[written] = position;
      attention[written] = 0.0f;
    }
    __syncthreads();
    const int visible = min(p.fixed_slots + position + 1, C);
    // cpu::kv_attention's weights: per head exp(s − max) · float(1 / Σ exp), added in head order.
    for (int h = 0; h < p.heads; ++h) {
      const float* scores = p.scores + (size_t(row) * p.heads + h) * C;
      float largest = -INFINITY;
      for (int j = threadIdx.x; j < visible; j += blockDim.x) largest = fmaxf(largest, scores[j]);
      largest = budget_block_max(largest, float_scratch);
      float sum = 0.0f;
      for (int j = threadIdx.x; j < visible; j += blockDim.x) sum += expf(scores[j] - largest);
      sum = block_sum(sum, float_scratch);
      const float inverse = float(1.0 / double(sum));
      for (int j = threadIdx.x; j < visible; j += blockDim.x) attention[j] += expf(scores[j] - largest) * inverse;
    }
    __syncthreads();
  }

  // LayerKvCache::choose_slot for the next position.
  const int next = position + 1, recent = p.recent;
  int unused = INT_MAX, unused_slot = INT_MAX;  // the first unused slot
  float least = INFINITY;
  int victim = INT_MAX;
  int oldest = INT_MAX, oldest_slot = INT_MAX;
  for (int slot = threadIdx.x; slot < C; slot += blockDim.x) {
    const int at = positions[slot];
    if (at == kKvSlotUnused) keep_least(unused, unused_slot, slot, slot);
    if (at < 1) continue;
    keep_least(oldest, oldest_slot, at, slot);
    if (at > next - recent) continue;
    keep_least(least, victim, attention[slot], slot);
  }
  block_least(unused, unused_slot, int_scratch, slot_scratch);
  block_least(least, victim, float_scratch, slot_scratch);
  block_least(oldest, oldest_slot, int_scratch, slot_scratch);
  if (threadIdx.x == 0)
    p.write_slots[row] = unused_slot != INT_MAX ? unused_slot : victim != INT_MAX ? victim : oldest_slot;
}

}  // namespace

Status kv_budget_update(const KvBudgetArgs& args, Stream stream) {
  const std::string where = "kv_budget_update: ";
  if (args.batch <= 0 || args.batch > 65535 || args.heads <= 0 || args.capacity <= 0)
    return invalid(where + "batch (1..65535), heads and capacity must be positive");
  if (args.budget < 2)
    return invalid(where + "a budget of " + std::to_string(args.budget) + " keeps BOS alone; give 2 or more");
  if (args.fixed_slots < 0 || args.fixed_slots + 2 > args.capacity)
    return invalid(where + "a capacity of " + std::to_string(args.capacity) + " holds no two shape slots after " +
                   std::to_string(args.fixed_slots) + " fixed ones");
  if (!args.position || !args.attention || !args.slot_positions || !args.write_slots)
    return invalid(where + "position, attention, slot_positions and write_slots are required");
  BudgetParams params{};
  params.heads = args.heads;
  params.capacity = args.capacity;
  params.fixed_slots = args.fixed_slots;
  params.recent = std::max(1, args.budget / 2);
  params.position = args.position;
  params.scores = args.scores;
  params.attention = args.attention;
  params.slot_positions = args.slot_positions;
  params.write_slots = args.write_slots;
  kv_budget_kernel<<<args.batch, kBudgetThreads, 0, stream>>>(params);
  return launch_status("kv_budget_update kernel launch");
}

const char* kv_cache_form_name(KvCacheForm form) {
  switch (form) {
    case KvCacheForm::kF32:
      return "f32";
    case KvCacheForm::kBF16:
      return "bf16";
    case KvCacheForm::kFp8:
      return "fp8";
    case KvCacheForm::kInt8:
      return "int8";
  }
  return "?";
}

KvCacheSizes kv_cache_sizes(KvCacheForm form, int batch, int heads, int head_dim, int capacity) {
  const std::size_t slots = std::size_t(batch) * heads * capacity;
  const std::size_t cells = slots * head_dim;
  KvCacheSizes sizes;
  switch (form) {
    case KvCacheForm::kF32:
      sizes.code_bytes = cells * 4;
      break;
    case KvCacheForm::kBF16:
      sizes.code_bytes = cells * 2;
      break;
    case KvCacheForm::kFp8:
      sizes.code_bytes = cells;
      sizes.key_scales = sizes.value_scales = slots;
      break;
    case KvCacheForm::kInt8:
      sizes.code_bytes = cells;
      sizes.value_scales = slots;
      sizes.key_scales =
          std::size_t(batch) * heads * std::size_t((capacity + kInt8KeyBlock - 1) / kInt8KeyBlock) * head_dim;
      sizes.key_residual = std::size_t(batch) * heads * kInt8KeyBlock * head_dim;
      break;
  }
  return sizes;
}

Status kv_cache_store(const KvCacheStoreArgs& args, Stream stream) {
  const std::string where = "kv_cache_store: ";
  if (args.form == KvCacheForm::kF32)
    return invalid(where + "the form must be bf16, fp8 or int8, got " + kv_cache_form_name(args.form));
  if (args.batch <= 0 || args.heads <= 0 || args.batch > 65535 || args.heads > 65535)
    return invalid(where + "batch and heads must be in 1..65535");
  if (args.count < 0 || args.first_slot < 0 || args.first_slot + args.count > args.cache_capacity ||
      args.first_slot + args.count > args.source_capacity)
    return invalid(where + "slots " + std::to_string(args.first_slot) + ".." +
                   std::to_string(args.first_slot + args.count - 1) + " outside the cache of " +
                   std::to_string(args.cache_capacity) + " or the source of " + std::to_string(args.source_capacity));
  if (!args.source_keys || !args.source_values || !args.key_cache || !args.value_cache)
    return invalid(where + "sources and caches are required");
  if (args.form != KvCacheForm::kBF16 && (!args.scales.key_scales || !args.scales.value_scales ||
                                          (args.form == KvCacheForm::kInt8 && !args.scales.key_residual)))
    return invalid(where + "an " + kv_cache_form_name(args.form) +
                   " cache needs its key and value scales (and an int8 cache its key residual)");
  if (args.count == 0) return ok_status();
  StoreParams params{};
  params.source_keys = args.source_keys;
  params.source_values = args.source_values;
  params.source_capacity = args.source_capacity;
  params.first_slot = args.first_slot;
  params.count = args.count;
  params.key_cache = args.key_cache;
  params.value_cache = args.value_cache;
  params.scales = args.scales;
  params.cache_capacity = args.cache_capacity;
  params.heads = args.heads;
  params.head_dim = args.head_dim;
  const dim3 grid(args.heads, args.batch);
  switch (args.form) {
    case KvCacheForm::kBF16:
      return launch_store<KvCacheForm::kBF16>(args.head_dim, grid, params, stream);
    case KvCacheForm::kFp8:
      return launch_store<KvCacheForm::kFp8>(args.head_dim, grid, params, stream);
    default:
      return launch_store<KvCacheForm::kInt8>(args.head_dim, grid, params, stream);
  }
}

Status low_rank_kv_store(const LowRankStoreArgs& args, Stream stream) {
  const std::string where = "low_rank_kv_store: ";
  if (args.batch <= 0 || args.batch > 65535 || args.heads <= 0 || args.head_dim <= 0)
    return invalid(where + "batch (1..65535), heads and head_dim must be positive");
  if (!args.source_keys || !args.source_values || !args.key_basis || !args.value_basis || !args.key_cache ||
      !args.value_cache)
    return invalid(where + "sources, bases and caches are required");
  if (!args.position && (args.count < 0 || args.first_slot < 0 || args.first_slot + args.count > args.cache_capacity ||
                         args.first_slot + args.count > args.source_capacity))
    return invalid(where + "slots " + std::to_string(args.first_slot) + ".." +
                   std::to_string(args.first_slot + args.count - 1) + " outside the cache of " +
                   std::to_string(args.cache_capacity) + " or the source of " + std::to_string(args.source_capacity));
  if ((args.form == KvCacheForm::kFp8 || args.form == KvCacheForm::kInt8) &&
      (!args.scales.key_scales || !args.scales.value_scales ||
       (args.form == KvCacheForm::kInt8 && !args.scales.key_residual)))
    return invalid(where + "an " + kv_cache_form_name(args.form) +
                   " cache needs its key and value scales (and an int8 cache its key residual)");
  if (!args.position && args.count == 0) return ok_status();
  LowRankStoreParams params{};
  params.source_keys = args.source_keys;
  params.source_values = args.source_values;
  params.source_capacity = args.source_capacity;
  params.heads = args.heads;
  params.head_dim = args.head_dim;
  params.rank = args.rank;
  params.key_basis = args.key_basis;
  params.value_basis = args.value_basis;
  params.first_slot = args.first_slot;
  params.count = args.count;
  params.position = args.position;
  params.slot_offset = args.slot_offset;
  params.key_cache = args.key_cache;
  params.value_cache = args.value_cache;
  params.scales = args.scales;
  params.cache_capacity = args.cache_capacity;
  switch (args.form) {
    case KvCacheForm::kF32:
      return launch_low_rank_store<KvCacheForm::kF32>(args.rank, args.batch, params, stream);
    case KvCacheForm::kBF16:
      return launch_low_rank_store<KvCacheForm::kBF16>(args.rank, args.batch, params, stream);
    case KvCacheForm::kFp8:
      return launch_low_rank_store<KvCacheForm::kFp8>(args.rank, args.batch, params, stream);
    case KvCacheForm::kInt8:
      return launch_low_rank_store<KvCacheForm::kInt8>(args.rank, args.batch, params, stream);
  }
  return invalid(where + "unknown cache form");
}

Status project_heads(const ProjectHeadsArgs& args, Stream stream) {
  if (args.batch <= 0 || args.heads <= 0 || args.rows <= 0 || args.cols <= 0 || !args.weights || !args.input ||
      !args.output)
    return invalid("project_heads: positive sizes, weights, input and output are required");
  ProjectHeadsParams params{args.batch, args.heads, args.rows, args.cols, args.weights, args.input, args.output};
  const int total = args.batch * args.heads * args.rows;
  const int blocks = std::min((total + kLowRankThreads - 1) / kLowRankThreads, 1024);
  project_heads_kernel<<<blocks, kLowRankThreads, 0, stream>>>(params);
  return launch_status("project_heads kernel launch");
}

Status fp8_e4m3_encode(const float* input, unsigned char* output, int count, Stream stream) {
  if (!input || !output || count < 0) return invalid("fp8_e4m3_encode: input and output are required");
  if (count == 0) return ok_status();
  const int blocks = std::min((count + kEncodeThreads - 1) / kEncodeThreads, 1024);
  fp8_encode_kernel<<<blocks, kEncodeThreads, 0, stream>>>(input, output, count);
  return launch_status("fp8_e4m3_encode kernel launch");
}

}  // namespace cubeforge::cuda
