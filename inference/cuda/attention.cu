// Flash-decoding attention kernels (see attention.h for the contract).
//
// Split kernel: grid (splits, heads, batch), 4 warps, one split of
// keys_per_split keys (32 to 64) per block. A key is handled by a group of
// D/E lanes, each holding E query elements (pre-scaled by 1/sqrt(D)) and
// loading E key and E value elements per key in one 16-byte load (E = 4 for
// an f32 cache, 8 for bf16), so a warp reads whole 128-byte lines. Each group
// keeps its own online softmax (running max m, sum l, output acc) over keys
// strided by the number of groups, with four keys' loads issued before their
// dot products; groups then merge by shuffles within a warp and through
// shared memory across warps. All loop bounds are uniform across the block,
// so every lane reaches every shuffle.
//
// The split merge runs in the last block of each (row, head) to finish: every
// block writes its (m, l, acc), fences, and counts itself in; the one that
// counts last combines the splits in split order (so the result does not
// depend on which block that is) and resets the counter for the next launch.
// One launch instead of two.
//
// Fused prologue: given the new token's raw q | k | v, each block normalises
// and rotates its head's query into shared memory itself, and the block whose
// split holds the token's slot writes the normalised, rotated key and the
// value into the cache before attending. The cache is read with plain
// (coherent) loads, since this launch writes it. An fp8 or int8 cache is
// stored by that block's warp 1 once the key is in shared memory
// (kv_store.cuh: a head's scale needs the whole head), and read through
// 8-byte loads of 8 codes, each widened and scaled as the CPU's kv_load does.
//
// Decode attention reads 2·length·D·(4 or 2) bytes per (row, head) and streams
// it once; the split count gives batch·heads·splits of about two blocks per SM
// on an H200 at the end of a generation.
#include <cmath>

#include "inference/cuda/attention.h"
#include "inference/cuda/cuda_internal.cuh"
#include "inference/cuda/head_norm_rope.cuh"
#include "inference/cuda/kv_store.cuh"

namespace cubeforge::cuda {
namespace {

using namespace detail;

constexpr int kSplitWarps = 4;
constexpr int kSplitThreads = kSplitWarps * kWarpSize;
constexpr int kKeyUnroll = 4;
constexpr int kTargetBlocks = 264;  // two blocks on each of an H200's 132 SMs

struct AttentionParams {
  const float* query;  // [batch·heads, D], or nullptr with `raw` (fused prologue)
  const float* raw;    // [batch, raw_stride]: q | k | v of the new token
  int raw_stride;
  const float* query_norm_weight;
  const float* key_norm_weight;
  float eps;
  float rope_theta;
  const int* write_position;
  int cache_slot_offset;
  const int* write_slots;  // [batch] with a budget (kEvicting), else null
  float* scores;           // [batch·heads, capacity] with a budget, else null
  void* key_cache;
  void* value_cache;
  KvCacheScales scales;
  int heads;
  int capacity;
  const int* position;
  int length_offset;
  int keys_per_split;
  int splits;
  unsigned* counters;     // [batch·heads]: blocks of this launch done so far
  float* partial_stats;   // [batch·heads, splits, 2]: running max, sum of exponentials
  float* partial_output;  // [batch·heads, splits, D]
  float* output;
  int output_stride;
  float scale;
  bool shared_kv_head;  // every head reads cache head 0 of its batch row (low-rank keys and values)
  int head_dim;         // D ≤ P, the size the kernel is built for
};

// E cache elements widened to f32 from one 16-byte load.
template <class Cache>
struct CacheVector;

template <>
struct CacheVector<float> {
  static constexpr int kElements = 4;
  __device__ __forceinline__ static void load(const float* at, float (&x)[4]) {
    const float4 v = *reinterpret_cast<const float4*>(at);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  }
};

template <>
struct CacheVector<__nv_bfloat16> {
  static constexpr int kElements = 8;
  __device__ __forceinline__ static void load(const __nv_bfloat16* at, float (&x)[8]) {
    const uint4 v = *reinterpret_cast<const uint4*>(at);
    x[0] = bf16_low(v.x), x[1] = bf16_high(v.x), x[2] = bf16_low(v.y), x[3] = bf16_high(v.y);
    x[4] = bf16_low(v.z), x[5] = bf16_high(v.z), x[6] = bf16_low(v.w), x[7] = bf16_high(v.w);
  }
};

template <KvCacheForm Form>
struct PlainCache;
template <>
struct PlainCache<KvCacheForm::kF32> {
  using Type = float;
};
template <>
struct PlainCache<KvCacheForm::kBF16> {
  using Type = __nv_bfloat16;
};

// One (batch row, head) of the cache, read E elements at a time (a lane's
// columns [column, column + E) of one slot), widened to f32. D is the head
// size (the slot stride).
template <KvCacheForm Form>
struct CacheReader {  // f32 and bf16
  using Cache = typename PlainCache<Form>::Type;
  static constexpr int kElements = CacheVector<Cache>::kElements;
  const Cache* keys;
  const Cache* values;
  int D;
  __device__ __forceinline__ CacheReader(const KvHead& head, int /*length*/, int head_dim)
      : keys(static_cast<const Cache*>(head.keys)), values(static_cast<const Cache*>(head.values)), D(head_dim) {}
  __device__ __forceinline__ void key(int slot, int column, float (&x)[kElements]) const {
    CacheVector<Cache>::load(keys + size_t(slot) * D + column, x);
  }
  __device__ __forceinline__ void value(int slot, int column, float (&x)[kElements]) const {
    CacheVector<Cache>::load(values + size_t(slot) * D + column, x);
  }
};

// Eight 1-byte codes from one 8-byte load, each widened, times `scale`.
template <KvCacheForm Form>
__device__ __forceinline__ void widen_codes(const uint8_t* at, float scale, float (&x)[8]) {
  const uint2 v = *reinterpret_cast<const uint2*>(at);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t code = ((i < 4 ? v.x : v.y) >> (8 * (i % 4))) & 0xFFu;
    const float widened = Form == KvCacheForm::kFp8 ? fp8_e4m3_to_f32(code) : float(int8_t(code));
    x[i] = widened * scale;
  }
}

template <>
struct CacheReader<KvCacheForm::kFp8> {
  static constexpr int kElements = 8;
  KvHead head;
  int D;
  __device__ __forceinline__ CacheReader(const KvHead& h, int /*length*/, int head_dim) : head(h), D(head_dim) {}
  __device__ __forceinline__ void key(int slot, int column, float (&x)[8]) const {
    widen_codes<KvCacheForm::kFp8>(static_cast<const uint8_t*>(head.keys) + size_t(slot) * D + column,
                                   head.key_scales[slot], x);
  }
  __device__ __forceinline__ void value(int slot, int column, float (&x)[8]) const {
    widen_codes<KvCacheForm::kFp8>(static_cast<const uint8_t*>(head.values) + size_t(slot) * D + column,
                                   head.value_scales[slot], x);
  }
};

// KIVI: keys of whole blocks below `quantized` are codes with a scale per
// channel, the block being filled is f32 in the residual.
template <>
struct CacheReader<KvCacheForm::kInt8> {
  static constexpr int kElements = 8;
  KvHead head;
  int quantized;
  int D;
  __device__ __forceinline__ CacheReader(const KvHead& h, int length, int head_dim)
      : head(h), quantized(length / kInt8KeyBlock * kInt8KeyBlock), D(head_dim) {}
  __device__ __forceinline__ void key(int slot, int column, float (&x)[8]) const {
    if (slot >= quantized) {
      const float* row = head.key_residual + size_t(slot % kInt8KeyBlock) * D + column;
      const float4 a = *reinterpret_cast<const float4*>(row), b = *reinterpret_cast<const float4*>(row + 4);
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
      return;
    }
    const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const int8_t*>(head.keys) + size_t(slot) * D + column);
    const float* scales = head.key_scales + size_t(slot / kInt8KeyBlock) * D + column;
    const float4 a = *reinterpret_cast<const float4*>(scales), b = *reinterpret_cast<const float4*>(scales + 4);
    const float scale[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = float(int8_t(((i < 4 ? v.x : v.y) >> (8 * (i % 4))) & 0xFFu)) * scale[i];
  }
  __device__ __forceinline__ void value(int slot, int column, float (&x)[8]) const {
    widen_codes<KvCacheForm::kInt8>(static_cast<const uint8_t*>(head.values) + size_t(slot) * D + column,
                                    head.value_scales[slot], x);
  }
};

template <KvCacheForm Form>
constexpr bool kPlainForm = Form == KvCacheForm::kF32 || Form == KvCacheForm::kBF16;

// The cache of (batch row, head) `row_head` as its form lays it out.
template <KvCacheForm Form>
__device__ __forceinline__ KvHead cache_head(void* keys, void* values, const KvCacheScales& scales, int row_head,
                                             int capacity, int D) {
  if constexpr (kPlainForm<Form>) {
    using Cache = typename PlainCache<Form>::Type;
    const size_t base = size_t(row_head) * capacity * D;
    return KvHead{static_cast<Cache*>(keys) + base, static_cast<Cache*>(values) + base, nullptr, nullptr, nullptr};
  } else {
    return kv_head(keys, values, scales, Form, row_head, capacity, D);
  }
}

__device__ __forceinline__ int current_length(const AttentionParams& p) {
  const int length = (p.position ? *p.position : 0) + p.length_offset;
  return min(max(length, 0), p.capacity);
}

// Folds (other_max, other_sum, other_acc) into (max, sum, acc).
template <int E>
__device__ __forceinline__ void merge_softmax(float& max_value, float& sum, float (&acc)[E], float other_max,
                                              float other_sum, const float (&other_acc)[E]) {
  const float merged = fmaxf(max_value, other_max);
  if (merged == -INFINITY) return;
  const float mine = expf(max_value - merged);
  const float theirs = expf(other_max - merged);
  sum = sum * mine + other_sum * theirs;
#pragma unroll
  for (int i = 0; i < E; ++i) acc[i] = acc[i] * mine + other_acc[i] * theirs;
  max_value = merged;
}

// Output columns per thread of a block-wide attend: P / 128 rounded up.
template <int P>
constexpr int kOutputsPerThread = (P + kSplitThreads - 1) / kSplitThreads;

// One query against keys [begin, end) of one (batch row, head), by the whole
// block (begin < end, the same for every thread). P is the power of two the
// kernel is built for, D ≤ P the head size: a key is handled by
// L = min(32, P / E) lanes, each holding V = P / (E·L) vectors of E columns,
// (v·L + lane)·E for v < V, so a warp's loads for one v are contiguous; the
// columns from D on are zeros that no lane loads. On return, thread t holds
// the unnormalised output columns t, t + 128, … below D in out_value, and
// every thread the block's running max and sum of exponentials. kScores:
// each key's score (the softmax's input) also goes to scores[key], for a
// budget's accumulator.
template <int P, bool kScores = false, class Reader>
__device__ __forceinline__ void attend_keys(const float* query, float scale, const Reader& cache, int D, int begin,
                                            int end, float (&out_value)[kOutputsPerThread<P>], float& out_max,
                                            float& out_total, float* scores = nullptr) {
  constexpr int E = Reader::kElements;
  constexpr int kLanesPerKey = P / E < kWarpSize ? P / E : kWarpSize;
  constexpr int V = P / (E * kLanesPerKey);
  constexpr int kKeysPerWarp = kWarpSize / kLanesPerKey;
  constexpr int kGroups = kSplitWarps * kKeysPerWarp;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int sub = lane % kLanesPerKey;
  const int group = warp * kKeysPerWarp + lane / kLanesPerKey;

  int column[V];
  bool column_in_head[V];
  float q[V][E];
#pragma unroll
  for (int c = 0; c < V; ++c) {
    column[c] = (c * kLanesPerKey + sub) * E;
    column_in_head[c] = column[c] < D;  // D is a multiple of E: a vector is all in or all out
#pragma unroll
    for (int i = 0; i < E; i += 4) {
      const float4 v = column_in_head[c] ? *reinterpret_cast<const float4*>(query + column[c] + i)
                                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      q[c][i] = v.x * scale, q[c][i + 1] = v.y * scale, q[c][i + 2] = v.z * scale, q[c][i + 3] = v.w * scale;
    }
  }

  float max_value = -INFINITY, sum = 0.0f, acc[V * E];  // column c·E + i of the lane's vectors
#pragma unroll
  for (int i = 0; i < V * E; ++i) acc[i] = 0.0f;
  for (int base = begin; base < end; base += kGroups * kKeyUnroll) {
    float k[kKeyUnroll][V][E], v[kKeyUnroll][V][E];
    bool valid[kKeyUnroll];
#pragma unroll
    for (int u = 0; u < kKeyUnroll; ++u) {
      const int key = base + u * kGroups + group;
      valid[u] = key < end;
#pragma unroll
      for (int c = 0; c < V; ++c) {
        if (valid[u] && column_in_head[c]) {
          cache.key(key, column[c], k[u][c]);
          cache.value(key, column[c], v[u][c]);
        } else {
#pragma unroll
          for (int i = 0; i < E; ++i) k[u][c][i] = v[u][c][i] = 0.0f;
        }
      }
    }
    float score[kKeyUnroll];
#pragma unroll
    for (int u = 0; u < kKeyUnroll; ++u) {
      float dot = q[0][0] * k[u][0][0];
#pragma unroll
      for (int c = 0; c < V; ++c)
#pragma unroll
        for (int i = c == 0 ? 1 : 0; i < E; ++i) dot = fmaf(q[c][i], k[u][c][i], dot);
#pragma unroll
      for (int offset = kLanesPerKey / 2; offset > 0; offset >>= 1) dot += __shfl_xor_sync(kFullMask, dot, offset);
      score[u] = valid[u] ? dot : -INFINITY;
      if constexpr (kScores) {
        if (valid[u] && sub == 0) scores[base + u * kGroups + group] = dot;
      }
    }
    float new_max = max_value;
#pragma unroll
    for (int u = 0; u < kKeyUnroll; ++u) new_max = fmaxf(new_max, score[u]);
    if (new_max == -INFINITY) continue;  // this group has no key yet; the shuffles above were still reached
    const float rescale = expf(max_value - new_max);
    sum *= rescale;
#pragma unroll
    for (int i = 0; i < V * E; ++i) acc[i] *= rescale;
#pragma unroll
    for (int u = 0; u < kKeyUnroll; ++u) {
      const float weight = valid[u] ? expf(score[u] - new_max) : 0.0f;
      sum += weight;
#pragma unroll
      for (int c = 0; c < V; ++c)
#pragma unroll
        for (int i = 0; i < E; ++i) acc[c * E + i] = fmaf(weight, v[u][c][i], acc[c * E + i]);
    }
    max_value = new_max;
  }

  // Merge the groups of this warp (lanes with the same `sub`).
#pragma unroll
  for (int offset = kLanesPerKey; offset < kWarpSize; offset <<= 1) {
    const float other_max = __shfl_xor_sync(kFullMask, max_value, offset);
    const float other_sum = __shfl_xor_sync(kFullMask, sum, offset);
    float other_acc[V * E];
#pragma unroll
    for (int i = 0; i < V * E; ++i) other_acc[i] = __shfl_xor_sync(kFullMask, acc[i], offset);
    merge_softmax<V * E>(max_value, sum, acc, other_max, other_sum, other_acc);
  }

  __shared__ float warp_max[kSplitWarps], warp_sum_of_weights[kSplitWarps];
  __shared__ float warp_output[kSplitWarps][P];
  if (lane < kLanesPerKey) {
#pragma unroll
    for (int c = 0; c < V; ++c)
      if (column_in_head[c]) {
#pragma unroll
        for (int i = 0; i < E; ++i) warp_output[warp][column[c] + i] = acc[c * E + i];
      }
    if (lane == 0) warp_max[warp] = max_value, warp_sum_of_weights[warp] = sum;
  }
  __syncthreads();
  float block_max = -INFINITY;
  for (int w = 0; w < kSplitWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
  float total = 0.0f;
  for (int w = 0; w < kSplitWarps; ++w)
    if (warp_max[w] != -INFINITY) total = fmaf(warp_sum_of_weights[w], expf(warp_max[w] - block_max), total);
#pragma unroll
  for (int o = 0; o < kOutputsPerThread<P>; ++o) {
    const int d = int(threadIdx.x) + o * kSplitThreads;
    float output = 0.0f;
    if (d < D) {
      for (int w = 0; w < kSplitWarps; ++w) {
        if (warp_max[w] == -INFINITY) continue;
        output = fmaf(warp_output[w][d], expf(warp_max[w] - block_max), output);
      }
    }
    out_value[o] = output;
  }
  out_max = block_max;
  out_total = total;
  __syncthreads();  // the warp arrays may be reused by the caller's next call
}

// kEvicting: the new token's slot comes from p.write_slots and every key's
// score goes to p.scores (a KV budget); otherwise the code is the plain
// cache's. P covers the head size p.head_dim (with_padded_head_dim).
template <int P, KvCacheForm Form, bool kEvicting>
__global__ void __launch_bounds__(kSplitThreads) attention_split_kernel(const AttentionParams p) {
  __shared__ __align__(16) float query_shared[P];
  __shared__ __align__(16) float key_shared[P];  // fp8, int8: the new key, for the store
  __shared__ bool last_block;
  const int D = p.head_dim;
  const int split = blockIdx.x;
  const int head = blockIdx.y;
  const int batch_row = blockIdx.z;
  const int row_head = batch_row * p.heads + head;
  const KvHead cache =
      cache_head<Form>(p.key_cache, p.value_cache, p.scales, p.shared_kv_head ? batch_row : row_head, p.capacity, D);

  const float* query = p.query ? p.query + size_t(row_head) * D : query_shared;
  if (p.raw) {
    // The new token: warp 0 its query, warp 1 (in the block whose split holds
    // the slot) its key and value into the cache.
    const int position = *p.write_position;
    const int slot = kEvicting ? p.write_slots[batch_row] : position + p.cache_slot_offset;
    const int first_key = split * p.keys_per_split;
    const bool writes = slot >= first_key && slot < first_key + p.keys_per_split && slot < p.capacity;
    const int warp = threadIdx.x / kWarpSize;
    const int width = p.heads * D;
    const float* row = p.raw + size_t(batch_row) * p.raw_stride + head * D;
    if (warp == 0) {
      norm_rotate_head<P>(row, p.query_norm_weight, p.eps, p.rope_theta, position, D, [&](int j, float x, float y) {
        query_shared[2 * j] = x;
        query_shared[2 * j + 1] = y;
      });
    } else if (warp == 1 && writes) {
      if constexpr (kPlainForm<Form>) {
        using Cache = typename PlainCache<Form>::Type;
        Cache* keys = static_cast<Cache*>(cache.keys);
        Cache* values = static_cast<Cache*>(cache.values);
        norm_rotate_head<P>(row + width, p.key_norm_weight, p.eps, p.rope_theta, position, D,
                            [&](int j, float x, float y) { store_pair(keys, size_t(slot) * D + 2 * j, x, y); });
        const float* value = row + 2 * width;
        for (int j = threadIdx.x % kWarpSize; j < D / 2; j += kWarpSize)
          store_pair(values, size_t(slot) * D + 2 * j, value[2 * j], value[2 * j + 1]);
      } else {
        norm_rotate_head<P>(row + width, p.key_norm_weight, p.eps, p.rope_theta, position, D,
                            [&](int j, float x, float y) {
                              key_shared[2 * j] = x;
                              key_shared[2 * j + 1] = y;
                            });
      }
    }
    __syncthreads();  // the query, and this block's own cache writes, are visible to the block
    if constexpr (!kPlainForm<Form>) {
      if (warp == 1 && writes) store_slot<P, Form>(cache, slot, key_shared, row + 2 * width, D);
      __syncthreads();  // the stored slot (and a quantised int8 block) are visible to the block
    }
  }

  const int length = current_length(p);
  const int begin = split * p.keys_per_split;
  const int end = min(begin + p.keys_per_split, length);
  float* partial_output = p.partial_output + (size_t(row_head) * p.splits + split) * D;
  float* partial_stats = p.partial_stats + (size_t(row_head) * p.splits + split) * 2;
  if (begin < end) {
    float value[kOutputsPerThread<P>], block_max = 0.0f, total = 0.0f;
    attend_keys<P, kEvicting>(query, p.scale, CacheReader<Form>(cache, length, D), D, begin, end, value, block_max,
                              total, kEvicting ? p.scores + size_t(row_head) * p.capacity : nullptr);
#pragma unroll
    for (int o = 0; o < kOutputsPerThread<P>; ++o) {
      const int d = int(threadIdx.x) + o * kSplitThreads;
      if (d < D) partial_output[d] = value[o];
    }
    if (threadIdx.x == 0) partial_stats[0] = block_max, partial_stats[1] = total;
  } else {
    for (int d = threadIdx.x; d < D; d += kSplitThreads) partial_output[d] = 0.0f;
    if (threadIdx.x == 0) partial_stats[0] = -INFINITY, partial_stats[1] = 0.0f;
  }

  // The last block of this (row, head) to get here merges every split.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(p.counters + row_head, 1u) == unsigned(p.splits - 1);
  __syncthreads();
  if (!last_block) return;
  if (int(threadIdx.x) < D) {
    const float* stats = p.partial_stats + size_t(row_head) * p.splits * 2;
    const float* partial = p.partial_output + size_t(row_head) * p.splits * D;
    float global_max = -INFINITY;
    for (int s = 0; s < p.splits; ++s) global_max = fmaxf(global_max, __ldcg(stats + 2 * s));
    for (int d = int(threadIdx.x); d < D; d += kSplitThreads) {
      float output = 0.0f, total = 0.0f;
      if (global_max != -INFINITY) {
        for (int s = 0; s < p.splits; ++s) {
          const float split_max = __ldcg(stats + 2 * s);
          if (split_max == -INFINITY) continue;
          const float weight = expf(split_max - global_max);
          output = fmaf(__ldcg(partial + size_t(s) * D + d), weight, output);
          total = fmaf(__ldcg(stats + 2 * s + 1), weight, total);
        }
      }
      p.output[size_t(batch_row) * p.output_stride + head * D + d] = total > 0.0f ? output / total : 0.0f;
    }
  }
  if (threadIdx.x == 0) p.counters[row_head] = 0;  // ready for the next launch (the next graph replay)
}

struct PrefillParams {
  const float* query;  // [batch, query_rows, heads·D]
  int query_rows;
  int causal_base;
  int kv_length;
  const void* key_cache;
  const void* value_cache;
  KvCacheScales scales;
  int heads;
  int capacity;
  float* output;  // [batch, query_rows, heads·D]
  float scale;
  int head_dim;  // D ≤ P
};

// Grid (query_rows, heads, batch): one query row of one head per block.
template <int P, KvCacheForm Form>
__global__ void __launch_bounds__(kSplitThreads) attention_prefill_kernel(const PrefillParams p) {
  const int D = p.head_dim;
  const int row = blockIdx.x;
  const int head = blockIdx.y;
  const int batch_row = blockIdx.z;
  const int end = min(p.kv_length, p.causal_base + row + 1);
  const size_t query_at = (size_t(batch_row) * p.query_rows + row) * p.heads * D + size_t(head) * D;
  if (end <= 0) {
    for (int d = threadIdx.x; d < D; d += kSplitThreads) p.output[query_at + d] = 0.0f;
    return;
  }
  // The kernel only reads: the const casts are for the shared KvHead view.
  const KvHead cache = cache_head<Form>(const_cast<void*>(p.key_cache), const_cast<void*>(p.value_cache), p.scales,
                                        batch_row * p.heads + head, p.capacity, D);
  float value[kOutputsPerThread<P>], block_max = 0.0f, total = 0.0f;
  attend_keys<P>(p.query + query_at, p.scale, CacheReader<Form>(cache, p.kv_length, D), D, 0, end, value, block_max,
                 total);
#pragma unroll
  for (int o = 0; o < kOutputsPerThread<P>; ++o) {
    const int d = int(threadIdx.x) + o * kSplitThreads;
    if (d < D) p.output[query_at + d] = total > 0.0f ? value[o] / total : 0.0f;
  }
}

template <KvCacheForm Form, bool kEvicting = false>
Status dispatch_head_dim(int head_dim, const AttentionParams& params, int batch, Stream stream) {
  return with_padded_head_dim(head_dim, "attention_decode", [&](auto padded) {
    const dim3 grid(params.splits, params.heads, batch);
    attention_split_kernel<decltype(padded)::value, Form, kEvicting><<<grid, kSplitThreads, 0, stream>>>(params);
    return launch_status("attention_decode kernel launch");
  });
}

Status dispatch_form(KvCacheForm form, int head_dim, const AttentionParams& params, int batch, Stream stream) {
  if (params.write_slots) {
    // An evicting cache: int8 is refused before this (its key blocks fill in order).
    switch (form) {
      case KvCacheForm::kF32:
        return dispatch_head_dim<KvCacheForm::kF32, true>(head_dim, params, batch, stream);
      case KvCacheForm::kBF16:
        return dispatch_head_dim<KvCacheForm::kBF16, true>(head_dim, params, batch, stream);
      case KvCacheForm::kFp8:
        return dispatch_head_dim<KvCacheForm::kFp8, true>(head_dim, params, batch, stream);
      default:
        return invalid("attention_decode: an evicting cache is f32, bf16 or fp8");
    }
  }
  switch (form) {
    case KvCacheForm::kF32:
      return dispatch_head_dim<KvCacheForm::kF32>(head_dim, params, batch, stream);
    case KvCacheForm::kBF16:
      return dispatch_head_dim<KvCacheForm::kBF16>(head_dim, params, batch, stream);
    case KvCacheForm::kFp8:
      return dispatch_head_dim<KvCacheForm::kFp8>(head_dim, params, batch, stream);
    case KvCacheForm::kInt8:
      return dispatch_head_dim<KvCacheForm::kInt8>(head_dim, params, batch, stream);
  }
  return invalid("attention_decode: unknown cache form");
}

template <KvCacheForm Form>
Status dispatch_prefill(int head_dim, const PrefillParams& params, int batch, Stream stream) {
  return with_padded_head_dim(head_dim, "attention_prefill", [&](auto padded) {
    const dim3 grid(params.query_rows, params.heads, batch);
    attention_prefill_kernel<decltype(padded)::value, Form><<<grid, kSplitThreads, 0, stream>>>(params);
    return launch_status("attention_prefill kernel launch");
  });
}

Status dispatch_prefill_form(KvCacheForm form, int head_dim, const PrefillParams& params, int batch, Stream stream) {
  switch (form) {
    case KvCacheForm::kF32:
      return dispatch_prefill<KvCacheForm::kF32>(head_dim, params, batch, stream);
    case KvCacheForm::kBF16:
      return dispatch_prefill<KvCacheForm::kBF16>(head_dim, params, batch, stream);
    case KvCacheForm::kFp8:
      return dispatch_prefill<KvCacheForm::kFp8>(head_dim, params, batch, stream);
    case KvCacheForm::kInt8:
      return dispatch_prefill<KvCacheForm::kInt8>(head_dim, params, batch, stream);
  }
  return invalid("attention_prefill: unknown cache form");
}

// The scales a form needs (and their alignment for the vector loads).
Status check_cache_scales(const std::string& where, KvCacheForm form, const KvCacheScales& scales) {
  if (form == KvCacheForm::kFp8 && (!scales.key_scales || !scales.value_scales))
    return invalid(where + "an fp8 cache needs its key and value scales");
  if (form == KvCacheForm::kInt8 && (!scales.key_scales || !scales.value_scales || !scales.key_residual ||
                                     !aligned(scales.key_scales, 16) || !aligned(scales.key_residual, 16)))
    return invalid(where + "an int8 cache needs its key scales and key residual (16-byte aligned) and value scales");
  return ok_status();
}

int splits_for(int cache_capacity, int keys_per_split) {
  return (cache_capacity + keys_per_split - 1) / keys_per_split;
}

// Workspace layout: counters (rounded up to 16 bytes), then the statistics
// and outputs of every split.
std::size_t counter_words(int batch, int heads) { return (std::size_t(batch) * heads + 3) / 4 * 4; }

}  // namespace

int attention_decode_keys_per_split(int batch, int heads, int cache_capacity) {
  // 64 keys per split, or 32 when that would leave the chip short of blocks.
  const int row_heads = std::max(1, batch * heads);
  return row_heads * splits_for(std::max(cache_capacity, 1), 64) >= kTargetBlocks ? 64 : 32;
}

std::size_t attention_decode_workspace_bytes(int batch, int heads, int head_dim, int cache_capacity,
                                             int keys_per_split) {
  if (keys_per_split <= 0) keys_per_split = attention_decode_keys_per_split(batch, heads, cache_capacity);
  const std::size_t splits = std::size_t(splits_for(cache_capacity, keys_per_split));
  return (counter_words(batch, heads) + std::size_t(batch) * heads * splits * (std::size_t(head_dim) + 2)) *
         sizeof(float);
}

Status attention_decode_reset_workspace(float* workspace, int batch, int heads, Stream stream) {
  if (!workspace || batch <= 0 || heads <= 0)
    return invalid("attention_decode_reset_workspace: a workspace, batch and heads are required");
  return cuda_status(cudaMemsetAsync(workspace, 0, counter_words(batch, heads) * sizeof(float), stream),
                     "attention_decode_reset_workspace");
}

Status attention_decode(const AttentionDecodeArgs& args, Stream stream) {
  const std::string where = "attention_decode: ";
  if (args.batch <= 0 || args.heads <= 0 || args.cache_capacity <= 0)
    return invalid(where + "batch, heads and cache_capacity must be positive");
  if (args.batch > 65535 || args.heads > 65535) return invalid(where + "at most 65535 batch rows and heads");
  if (!args.query == !args.raw_qkv) return invalid(where + "give either query or raw_qkv");
  if (!args.key_cache || !args.value_cache || !args.output || !args.workspace)
    return invalid(where + "caches, output and workspace are required");
  CUBEFORGE_TRY(check_cache_scales(where, args.cache_form, args.cache_scales));
  if (args.keys_per_split < 0 || args.keys_per_split % 16 != 0)
    return invalid(where + "keys_per_split must be 0 or a positive multiple of 16");
  if (args.cache_form == KvCacheForm::kInt8 && args.keys_per_split % kInt8KeyBlock != 0)
    return invalid(where + "an int8 cache needs keys_per_split 0 or a multiple of 32, got " +
                   std::to_string(args.keys_per_split));
  const int keys_per_split = args.keys_per_split ? args.keys_per_split
                                                 : attention_decode_keys_per_split(args.batch, args.heads,
                                                                                   args.cache_capacity);
  const std::size_t needed = attention_decode_workspace_bytes(args.batch, args.heads, args.head_dim,
                                                              args.cache_capacity, keys_per_split);
  if (args.workspace_bytes < needed)
    return invalid(where + "workspace of " + std::to_string(args.workspace_bytes) + " bytes, " +
                   std::to_string(needed) + " needed");
  const int width = args.heads * args.head_dim;
  const int output_stride = args.output_stride ? args.output_stride : width;
  if (output_stride < width) return invalid(where + "output_stride must cover heads·head_dim");
  if (!aligned(args.key_cache, 16) || !aligned(args.value_cache, 16) || !aligned(args.workspace, 16) ||
      (args.query && !aligned(args.query, 16)))
    return invalid(where + "query, caches and workspace must be 16-byte aligned");
  if (args.shared_kv_head && args.raw_qkv)
    return invalid(where +
                   "a shared KV head reads low-rank latents stored by low_rank_kv_store: give query, not raw_qkv");
  if (!(args.scale >= 0.0f)) return invalid(where + "scale must be 0 (1/sqrt(head_dim)) or positive");
  if (!args.write_slots != !args.scores)
    return invalid(where + "an evicting cache gives both write_slots and scores, or neither");
  if (args.write_slots) {
    if (!args.raw_qkv) return invalid(where + "write_slots place the fused prologue's key: give raw_qkv");
    if (args.cache_form == KvCacheForm::kInt8)
      return invalid(where + "an int8 cache quantises its keys in blocks of 32 slots written in order; it cannot "
                             "take write_slots (use an f32, bf16 or fp8 cache with a KV budget)");
  }
  if (args.raw_qkv) {
    if (!args.query_norm_weight || !args.key_norm_weight || !args.write_position)
      return invalid(where + "the fused prologue needs both norm weights and write_position");
    if (args.raw_stride < 3 * width || args.raw_stride % 2 != 0 || !aligned(args.raw_qkv, 8))
      return invalid(where + "raw_qkv rows must hold q, k and v (stride at least 3·heads·head_dim, even, 8-byte aligned)");
    if (!(args.eps > 0.0f) || !(args.rope_theta > 0.0f)) return invalid(where + "eps and rope_theta must be positive");
  }

  AttentionParams params{};
  params.query = args.query;
  params.raw = args.raw_qkv;
  params.raw_stride = args.raw_stride;
  params.query_norm_weight = args.query_norm_weight;
  params.key_norm_weight = args.key_norm_weight;
  params.eps = args.eps;
  params.rope_theta = args.rope_theta;
  params.write_position = args.write_position;
  params.cache_slot_offset = args.cache_slot_offset;
  params.write_slots = args.write_slots;
  params.scores = args.scores;
  params.key_cache = args.key_cache;
  params.value_cache = args.value_cache;
  params.scales = args.cache_scales;
  params.heads = args.heads;
  params.capacity = args.cache_capacity;
  params.position = args.position;
  params.length_offset = args.length_offset;
  params.keys_per_split = keys_per_split;
  params.splits = splits_for(args.cache_capacity, keys_per_split);
  const std::size_t row_heads = std::size_t(args.batch) * args.heads;
  params.counters = reinterpret_cast<unsigned*>(args.workspace);
  params.partial_stats = args.workspace + counter_words(args.batch, args.heads);
  params.partial_output = params.partial_stats + row_heads * params.splits * 2;
  params.output = args.output;
  params.output_stride = output_stride;
  params.scale = args.scale > 0.0f ? args.scale : float(1.0 / std::sqrt(double(args.head_dim)));
  params.shared_kv_head = args.shared_kv_head;
  params.head_dim = args.head_dim;
  return dispatch_form(args.cache_form, args.head_dim, params, args.batch, stream);
}

Status attention_prefill(const AttentionPrefillArgs& args, Stream stream) {
  const std::string where = "attention_prefill: ";
  if (args.batch <= 0 || args.heads <= 0 || args.cache_capacity <= 0 || args.query_rows <= 0)
    return invalid(where + "batch, heads, query_rows and cache_capacity must be positive");
  if (args.heads > 65535 || args.batch > 65535) return invalid(where + "at most 65535 heads and batch rows");
  if (args.kv_length < 0 || args.kv_length > args.cache_capacity)
    return invalid(where + "kv_length " + std::to_string(args.kv_length) + " outside the cache of " +
                   std::to_string(args.cache_capacity));
  if (!args.query || !args.key_cache || !args.value_cache || !args.output)
    return invalid(where + "query, caches and output are required");
  CUBEFORGE_TRY(check_cache_scales(where, args.cache_form, args.cache_scales));
  if (!aligned(args.query, 16) || !aligned(args.key_cache, 16) || !aligned(args.value_cache, 16))
    return invalid(where + "query and caches must be 16-byte aligned");
  PrefillParams params{};
  params.query = args.query;
  params.query_rows = args.query_rows;
  params.causal_base = args.causal_base;
  params.kv_length = args.kv_length;
  params.key_cache = args.key_cache;
  params.value_cache = args.value_cache;
  params.scales = args.cache_scales;
  params.heads = args.heads;
  params.capacity = args.cache_capacity;
  params.output = args.output;
  params.scale = float(1.0 / std::sqrt(double(args.head_dim)));
  params.head_dim = args.head_dim;
  return dispatch_prefill_form(args.cache_form, args.head_dim, params, args.batch, stream);
}

}  // namespace cubeforge::cuda
