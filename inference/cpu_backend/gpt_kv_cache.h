// The GPT's KV cache under the cache options: how keys and values are stored
// (cpu/kv_cache.h), which positions stay under a budget (H2O heavy-hitter
// eviction), and low-rank keys and values.
//
// Options (`--kv-cache`, `--kv-budget`, `--kv-rank`):
//   format  f32 (default, exact against the reference), bf16, fp8 or int8.
//   budget  shape slots kept per layer and batch row; 0 keeps every position.
//           The condition tokens and BOS always stay; of the others, the
//           most recent budget/2 positions stay, and when a new position
//           needs a slot the one with the least attention accumulated over
//           the decode steps so far (summed over heads) leaves. One choice
//           per layer and row, shared by its heads.
//   rank    keys and values projected onto the first R vectors of a per-layer
//           orthonormal basis (`cubeforge-lab calibrate-kv` writes them from
//           the SVD of cached keys and values). Attention runs in the reduced
//           space, which for an orthonormal basis gives exactly what attending
//           to the projected keys and values would: q·Pᵀ(P k) = (P q)·(P k)
//           per head, and the weighted sum of projected values is projected
//           back once. The latent is one head of R values that every query
//           head reads.
// Prefill attends over the exact keys and values it has just computed;
// the cache holds them in the stored form for the decode steps.
#pragma once

#include <memory>
#include <vector>

#include "inference/core/result.h"
#include "inference/cpu/kv_cache.h"
#include "inference/cpu/ops.h"
#include "inference/model/config.h"
#include "inference/model/kv_bases.h"

namespace cubeforge {

// One layer's cache for one batch row.
class LayerKvCache {
 public:
  // fixed_slots: the condition tokens this layer caches (never evicted);
  // positions: the shape positions the session holds; layer: the index into
  // the low-rank bases.
  LayerKvCache(const KvCacheOptions& options, size_t layer, int fixed_slots, int positions, int heads, int head_dim);

  void clear();
  // Caches one row: a condition token (position < 0) or a shape position.
  // key (rotated) and value: [width]. The exact cache keeps shape position p
  // in slot fixed_slots + p, so a position may be written again (parallel
  // decoding rewrites rejected guesses); the others append and evict.
  void append(int position, const float* key, const float* value);
  // One query [width] over the first `rows` cached rows (every row when
  // negative; only the exact cache is read in part); out: [width].
  void attend(const float* query, float* out, int rows = -1);
  // Forgets the shape positions from `positions` on (the exact cache only).
  void truncate(int positions);
  // Slot 0's value as float32 (the reference's cached decode reads it).
  void first_value(float* out) const;
  // Every cached row as float32 keys and values, [rows, width] each; with
  // low rank, the projections back to full width.
  void read(std::vector<float>* keys, std::vector<float>* values) const;
  int rows() const { return used_; }
  // What eviction reads, per slot: the shape position (−1 for a condition
  // token or a slot never written) and the attention accumulated since it was
  // written (tests hold the CUDA backend's to them).
  const std::vector<int>& slot_positions() const { return position_; }
  const std::vector<float>& slot_attention() const { return attention_; }
  // Bytes one attention over the cache reads: the stored rows and, with low
  // rank, the bases.
  double bytes_read() const;

 private:
  int choose_slot(int position);

  const KvCacheOptions* options_;
  const LowRankKv::Layer* low_rank_ = nullptr;
  int fixed_slots_, heads_, head_dim_;
  cpu::KvStore store_;
  int used_ = 0;
  std::vector<int> position_;    // per slot: its shape position, −1 for a condition token
  std::vector<float> attention_;  // per slot: attention accumulated over decode steps (H2O)
  std::vector<float> latent_key_, latent_value_, latent_query_, latent_out_;
};

}  // namespace cubeforge
