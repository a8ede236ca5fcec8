// The stored forms of a CUDA KV cache, and the store of f32 rows into them.
//
// The forms are the CPU's (KvFormat, inference/cpu/kv_cache.h), with the
// same codes and scales bit for bit, laid out per (batch row, head) so a head
// streams its slots contiguously (G = heads, C = capacity, D = head_dim):
//   kF32, kBF16  keys and values [batch, G, C, D] f32 or bf16 (rounded to nearest
//          even as f32_to_bf16 rounds, NaNs included);
//   kFp8   FP8 E4M3 codes [batch, G, C, D], one f32 scale per slot and head
//          ([batch, G, C] each for keys and values): the head's largest
//          magnitude maps to 448;
//   kInt8  KIVI: value codes [batch, G, C, D] int8 with a scale per slot and
//          head; key codes int8 with a scale per channel for each block of
//          32 slots ([batch, G, ceil(C / 32), D]), quantised when the block's
//          last slot is written. Until then the block's keys are float32 in
//          the residual [batch, G, 32, D] (slot s in row s % 32), so slots are
//          written in order, and the cache holding slots [0, n) has the keys
//          of the slots below n rounded down to 32 as codes.
// Attention (attention.h) widens them in registers as the CPU does.
#pragma once

#include <cstddef>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

enum class KvCacheForm { kF32, kBF16, kFp8, kInt8 };
const char* kv_cache_form_name(KvCacheForm form);  // "f32", "bf16", "fp8", "int8"

constexpr int kInt8KeyBlock = 32;  // slots per per-channel key scale (the CPU's kInt8KeyBlock)

// The buffers besides the codes that fp8 and int8 caches keep (null for f32 and bf16).
struct KvCacheScales {
  float* key_scales = nullptr;    // fp8 [batch, G, C]; int8 [batch, G, ceil(C / 32), D]
  float* value_scales = nullptr;  // fp8, int8 [batch, G, C]
  float* key_residual = nullptr;  // int8 [batch, G, 32, D]
};

// Element counts of one cache's buffers for these sizes (0 where a form has none).
struct KvCacheSizes {
  std::size_t code_bytes = 0;                                      // keys, and the same for values
  std::size_t key_scales = 0, value_scales = 0, key_residual = 0;  // floats
};
KvCacheSizes kv_cache_sizes(KvCacheForm form, int batch, int heads, int head_dim, int capacity);

// Stores slots [first_slot, first_slot + count) of every (batch row, head)
// from f32 rows into a bf16, fp8 or int8 cache, in slot order, as
// cpu::kv_store stores them one by one: for
// int8, the slots before first_slot must be stored already (the residual
// holds the block being filled) and a block whose last slot is stored is
// quantised. Sources: [batch, G, source_capacity, D] f32, slot s at row s
// (the layout of an f32 cache).
struct KvCacheStoreArgs {
  int batch = 1;
  int heads = 0;
  int head_dim = 0;  // head_dim_supported (cuda_api.h): a multiple of 16 up to 256
  const float* source_keys = nullptr;
  const float* source_values = nullptr;
  int source_capacity = 0;
  int first_slot = 0;
  int count = 0;

  KvCacheForm form = KvCacheForm::kFp8;  // kBF16, kFp8 or kInt8
  void* key_cache = nullptr;             // codes, [batch, G, cache_capacity, D]
  void* value_cache = nullptr;
  KvCacheScales scales;  // fp8 and int8
  int cache_capacity = 0;
};

Status kv_cache_store(const KvCacheStoreArgs& args, Stream stream);

// A KV budget (H2O heavy-hitter eviction, inference/cpu_backend/gpt_kv_cache.h) on
// the device: the slot choice of the CPU's LayerKvCache, per batch row of one
// layer, over its per-slot state in device memory. The cache keeps C =
// fixed_slots + min(budget, positions) slots; each slot has its shape position
// (−1 for a condition token, kKvSlotUnused before its first write) and the
// attention accumulated over the decode steps since it was written.
//
// Run after each decode step's attention_decode (which wrote the new token
// to write_slots[b] and each visible slot's scores): the written slot takes
// *position with no attention; each visible slot (the first
// min(fixed_slots + *position + 1, C)) gains its softmax probability summed
// over heads, in head order, as cpu::kv_attention's slot_weights; then
// write_slots[b] becomes the slot of position *position + 1: the first unused
// slot while there is one, else, of the shape positions 1.. (BOS and the
// condition never leave) older than the recent window (max(1, budget / 2)
// positions), the one with least attention, the first in slot order among
// equals; when the window covers them all, the oldest. With scores null (after
// a prefill) only the choice runs. One block per batch row.
constexpr int kKvSlotUnused = -2;

struct KvBudgetArgs {
  int batch = 1;
  int heads = 0;
  int capacity = 0;     // C
  int fixed_slots = 0;  // the condition's slots (a dual block's S, else 0)
  int budget = 0;       // ≥ 2
  const int* position = nullptr;  // device: the position this step decoded (the session's step)
  const float* scores = nullptr;  // [batch, heads, C] as attention_decode writes them, or null
  float* attention = nullptr;     // [batch, C] accumulated probabilities
  int* slot_positions = nullptr;  // [batch, C]
  int* write_slots = nullptr;     // [batch]: in, the slot this step wrote; out, the next step's
};

Status kv_budget_update(const KvBudgetArgs& args, Stream stream);

// Low-rank keys and values (a KV rank R, LowRankKv in
// inference/model/kv_bases.h): the cache keeps one head of R latents per
// slot, [batch, 1, C, R] in any form, that every query head reads.
//
// low_rank_kv_store: compresses f32 rows (rotated keys and values, [batch, G,
// source_capacity, D] as an f32 cache lays them out, slot s at row s) with
// the [R, G·D] bases, as cpu::linear does, and stores the latents of slots
// [first_slot, first_slot + count) in slot order as cpu::kv_store does (an
// int8 cache's earlier slots must be stored already). With `position` set,
// the one slot *position + slot_offset instead (a decode step: read at run
// time, so a captured graph serves every token). R is a head size the
// attention runs (head_dim_supported, cuda_api.h).
struct LowRankStoreArgs {
  int batch = 1;
  int heads = 0;     // G of the source
  int head_dim = 0;  // D of the source
  int rank = 0;      // R
  const float* source_keys = nullptr;
  const float* source_values = nullptr;
  int source_capacity = 0;
  const float* key_basis = nullptr;    // [R, G·D] f32
  const float* value_basis = nullptr;  // [R, G·D] f32
  int first_slot = 0;
  int count = 0;
  const int* position = nullptr;  // device, or nullptr for first_slot/count
  int slot_offset = 0;

  KvCacheForm form = KvCacheForm::kF32;
  void* key_cache = nullptr;  // [batch, 1, cache_capacity, R] elements of the form
  void* value_cache = nullptr;
  KvCacheScales scales;  // fp8 and int8
  int cache_capacity = 0;
};

Status low_rank_kv_store(const LowRankStoreArgs& args, Stream stream);

// Per-head projections between a head and its latent: for every batch row b
// and head h, output[b, h·rows + i] = Σ_j weights[h, i, j] · input[b, h·cols + j]
// in j order, as cpu::linear with the head's [rows, cols] matrix (the
// queries into the latent space with [R, D], latent outputs back with [D, R]).
struct ProjectHeadsArgs {
  int batch = 1;
  int heads = 0;
  int rows = 0;
  int cols = 0;
  const float* weights = nullptr;  // [heads, rows, cols] f32
  const float* input = nullptr;    // [batch, heads·cols]
  float* output = nullptr;         // [batch, heads·rows]
};

Status project_heads(const ProjectHeadsArgs& args, Stream stream);

// Tests only: cpu::fp8_e4m3_from_f32 on the device, code by code.
Status fp8_e4m3_encode(const float* input, unsigned char* output, int count, Stream stream);

}  // namespace cubeforge::cuda
