// Flash-decoding attention: one new query per (batch row, head) against the
// keys and values cached for positions [0, length).
//
//   out[b, h·D + d] = Σ_p softmax_p(q·k_p / sqrt(D)) · v_p[d]
//
// with q [batch, heads, D] f32 (already normalised and rotated), caches
// [batch, heads, capacity, D] in bf16 or f32 (rotated keys, as
// qk_norm_rope_cache_write stores them), D = head_dim ∈ {16, 32, 64, 128}, and
// length = (*position + length_offset) clamped to [0, capacity], read from device
// memory at run time so one captured graph serves every token. Dual-stream
// blocks pass length_offset = cond_len + 1, single-stream blocks 1. Passing
// position = nullptr makes length = length_offset (the reference's KV quirk in
// the single-stream blocks is length_offset = 1 with no position).
// A length of 0 gives zeros.
//
// The sequence is cut into splits of keys_per_split keys (fixed from the
// capacity, so the grid never changes between tokens); each split keeps an
// online softmax and writes (max, sum, unnormalised output) to the workspace,
// and a second kernel merges the splits. Splits past the current length exit
// after writing an empty partial.
#pragma once

#include <cstddef>

#include "inference/cuda/cuda_api.h"

namespace cubeforge::cuda {

struct AttentionDecodeArgs {
  int batch = 1;
  int heads = 0;
  int head_dim = 0;

  const float* query = nullptr;  // [batch, heads, head_dim]
  DType cache_type = DType::kBF16;
  const void* key_cache = nullptr;    // [batch, heads, cache_capacity, head_dim]
  const void* value_cache = nullptr;  // same
  int cache_capacity = 0;

  const int* position = nullptr;  // device, or nullptr for a fixed length
  int length_offset = 1;

  float* output = nullptr;  // [batch, output_stride], head h at [h·head_dim, …)
  int output_stride = 0;    // 0 means heads·head_dim

  float* workspace = nullptr;  // attention_decode_workspace_bytes(...) bytes
  std::size_t workspace_bytes = 0;
  int keys_per_split = 0;  // 0 chooses from the sizes; a multiple of 16 otherwise
};

// Keys per split chosen for these sizes (independent of the device).
int attention_decode_keys_per_split(int batch, int heads, int cache_capacity);

std::size_t attention_decode_workspace_bytes(int batch, int heads, int head_dim, int cache_capacity,
                                             int keys_per_split = 0);

Status attention_decode(const AttentionDecodeArgs& args, Stream stream);

// Prefill: many query rows per (batch row, head) against the cache, causally:
// query row i sees keys [0, min(kv_length, causal_base + i + 1)), the CPU's
// cpu::attention mask. The cond rows of a dual block pass causal_base 0 (the
// cond tokens attend causally among themselves), its shape rows causal_base =
// the cond length; single blocks 0. Queries and output are [batch,
// query_rows, heads·head_dim] f32; caches as for decode. One block per query
// row and head, every key streamed once per query: prefill is a few dozen
// rows, or the whole sequence in the no-cache mode of the ablation.
struct AttentionPrefillArgs {
  int batch = 1;
  int heads = 0;
  int head_dim = 0;
  const float* query = nullptr;
  int query_rows = 0;
  int causal_base = 0;
  int kv_length = 0;
  DType cache_type = DType::kF32;
  const void* key_cache = nullptr;
  const void* value_cache = nullptr;
  int cache_capacity = 0;
  float* output = nullptr;
};

Status attention_prefill(const AttentionPrefillArgs& args, Stream stream);

}  // namespace cubeforge::cuda
