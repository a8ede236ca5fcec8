// Flash-decoding attention: one new query per (batch row, head) against the
// keys and values cached for positions [0, length).
//
//   out[b, h·D + d] = Σ_p softmax_p(q·k_p / sqrt(D)) · v_p[d]
//
// with q [batch, heads, D] f32 (already normalised and rotated), caches
// [batch, heads, capacity, D] in one of the forms of kv_cache.h (f32, bf16,
// fp8 or int8 codes with their scales; rotated keys, as
// qk_norm_rope_cache_write and kv_cache_store store them), widened in
// registers as the CPU's kv_load widens them; D = head_dim, a multiple of 16
// from 16 to 256 (head_dim_supported, cuda_api.h), and
// length = (*position + length_offset) clamped to [0, capacity], read from device
// memory at run time so one captured graph serves every token. Dual-stream
// blocks pass length_offset = cond_len + 1, single-stream blocks 1. Passing
// position = nullptr makes length = length_offset (the reference's KV quirk in
// the single-stream blocks is length_offset = 1 with no position).
// A length of 0 gives zeros. The cache holds slots [0, length) (an int8
// cache's keys below length rounded down to 32 as codes, the rest in its
// residual).
//
// Fused prologue: instead of `query`, give the new token's raw projections
// (raw_qkv: q | k | v per batch row, each heads·D, as the fused c_qk|c_v
// matvec writes them) with the per-head norm weights, and the launch does
// what qk_norm_rope_cache_write does first: the query is normalised and
// rotated at *write_position, and the key (normalised, rotated) and value go
// to cache slot *write_position + cache_slot_offset (not written when that
// is outside the cache): codes and scales as cpu::kv_store makes them, an
// int8 key block quantised when this slot is its last. Then the attention
// reads the cache as above.
//
// The sequence is cut into splits of keys_per_split keys (fixed from the
// capacity, so the grid never changes between tokens); each split keeps an
// online softmax and the last split of each (row, head) to finish merges them,
// in one launch. The workspace holds per-(row, head) counters for that: they
// must be zero before the first launch (attention_decode_reset_workspace) and
// every launch leaves them zero again. An int8 cache needs keys_per_split to
// be a multiple of 32, so that the block its new key completes lies in the
// split that writes it.
#pragma once

#include <cstddef>

#include "inference/cuda/cuda_api.h"
#include "inference/cuda/kv_cache.h"

namespace cubeforge::cuda {

struct AttentionDecodeArgs {
  int batch = 1;
  int heads = 0;
  int head_dim = 0;

  const float* query = nullptr;  // [batch, heads, head_dim]; or nullptr with raw_qkv
  KvCacheForm cache_form = KvCacheForm::kBF16;
  void* key_cache = nullptr;    // [batch, heads, cache_capacity, head_dim] elements of the form
  void* value_cache = nullptr;  // same
  KvCacheScales cache_scales;   // fp8 and int8
  int cache_capacity = 0;

  const int* position = nullptr;  // device, or nullptr for a fixed length
  int length_offset = 1;

  // The fused prologue (see above); all unset when `query` is given.
  const float* raw_qkv = nullptr;  // [batch, raw_stride]
  int raw_stride = 0;
  const float* query_norm_weight = nullptr;  // [head_dim]
  const float* key_norm_weight = nullptr;    // [head_dim]
  float eps = 1e-5f;
  float rope_theta = 10000.0f;
  const int* write_position = nullptr;  // device: the new token's rotary position
  int cache_slot_offset = 0;            // its slot is *write_position + cache_slot_offset

  // An evicting cache (a KV budget, kv_budget_update in kv_cache.h), with
  // the fused prologue: the new token's slot is write_slots[b] per batch row
  // instead, and each attended slot's score (scaled q·k, the softmax's
  // input) goes to scores [batch, heads, cache_capacity]. Both or neither;
  // f32, bf16 or fp8 (an int8 cache's key blocks fill in order).
  const int* write_slots = nullptr;  // device, [batch]
  float* scores = nullptr;           // device

  // Low-rank keys and values (low_rank_kv_store in kv_cache.h): every query
  // head reads the cache's one head, [batch, 1, cache_capacity, head_dim]
  // (head_dim is then the rank). With `query` only: the store is separate.
  bool shared_kv_head = false;
  float scale = 0.0f;  // the scores' scale; 0 means 1/sqrt(head_dim) (a rank scales by the model's head dim)

  float* output = nullptr;  // [batch, output_stride], head h at [h·head_dim, …)
  int output_stride = 0;    // 0 means heads·head_dim

  float* workspace = nullptr;  // attention_decode_workspace_bytes(...) bytes, 16-byte aligned
  std::size_t workspace_bytes = 0;
  int keys_per_split = 0;  // 0 chooses from the sizes; a multiple of 16 otherwise
};

// Keys per split chosen for these sizes (independent of the device).
int attention_decode_keys_per_split(int batch, int heads, int cache_capacity);

std::size_t attention_decode_workspace_bytes(int batch, int heads, int head_dim, int cache_capacity,
                                             int keys_per_split = 0);

// Zeroes the workspace's counters (once, before its first launch).
Status attention_decode_reset_workspace(float* workspace, int batch, int heads, Stream stream);

Status attention_decode(const AttentionDecodeArgs& args, Stream stream);

// Prefill: many query rows per (batch row, head) against the cache, causally:
// query row i sees keys [0, min(kv_length, causal_base + i + 1)), the CPU's
// cpu::attention mask. The cond rows of a dual block pass causal_base 0 (the
// cond tokens attend causally among themselves), its shape rows causal_base =
// the cond length; single blocks 0. Queries and output are [batch,
// query_rows, heads·head_dim] f32; caches as for decode. One block per query
// row and head, every key streamed once per query: prefill is a few dozen
// rows, or the whole sequence in the no-cache mode of the ablation. The
// cache holds slots [0, kv_length).
struct AttentionPrefillArgs {
  int batch = 1;
  int heads = 0;
  int head_dim = 0;
  const float* query = nullptr;
  int query_rows = 0;
  int causal_base = 0;
  int kv_length = 0;
  KvCacheForm cache_form = KvCacheForm::kF32;
  const void* key_cache = nullptr;
  const void* value_cache = nullptr;
  int cache_capacity = 0;
  float* output = nullptr;
  KvCacheScales cache_scales;  // fp8 and int8
};

Status attention_prefill(const AttentionPrefillArgs& args, Stream stream);

}  // namespace cubeforge::cuda
