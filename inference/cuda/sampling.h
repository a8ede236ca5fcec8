// The end of a decode step on the device: classifier-free-guidance combine,
// token choice, and the next step's input, so no logits ever leave the GPU.
//
// One block of 1024 threads, per step:
//   1. logits: with two rows (row 0 conditional, row 1 unconditional) at step i
//      of N, γ = s·(N − i)/N and logits = (1 + γ)·cond − γ·uncond, rounded as
//      PyTorch rounds it (γ and 1 + γ in double, cast to float; no FMA). With
//      one row the logits are used as they are. Only the first `vocab` entries
//      count (the codes; the special tokens are never chosen).
//   2. choice: greedy (temperature ≤ 0) is the first index of the maximum, as
//      torch.argmax. Otherwise w = exp((logit − max)/temperature), then
//      - top-k (0 < k < vocab): keep logits ≥ the k-th largest (ties kept);
//      - top-p (0 < p < 1): keep token t iff the mass of all tokens with
//        w ≥ w_t is ≤ p of the (top-k-filtered) total, always keeping the
//        maximum (the reference's rule: a sorted prefix whose inclusive
//        cumulative probability stays within p, ties taken together);
//      - sample by inverse CDF in token order with u = sampling_uniform(seed, i).
//   3. outputs: tokens[i] = token; host_ring[i % capacity] = token, then
//      *host_ring_count = i + 1 (after a system-wide fence, so a host thread
//      that sees the count sees the token); next_input rows ← embedding[token];
//      and, when advance_step is set, *step = i + 1 for the next replay.
// The step index lives in device memory, so a captured graph needs no update.
#pragma once

#include <cstdint>

#include "inference/cuda/cuda_api.h"

#if defined(__CUDACC__)
#define CUBEFORGE_HOST_DEVICE __host__ __device__
#else
#define CUBEFORGE_HOST_DEVICE
#endif

namespace cubeforge::cuda {

// Largest vocabulary one sampling block holds in registers (16 per thread).
constexpr int kMaxSamplingVocab = 16384;

struct SamplingOptions {
  float temperature = 0.0f;  // ≤ 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // ≥ 1: off
  std::uint64_t seed = 0;
};

struct CfgSampleArgs {
  const float* logits = nullptr;  // [rows, logits_stride]
  int logits_stride = 0;
  int rows = 1;        // 1, or 2 for CFG (conditional first)
  int vocab = 0;       // entries considered, ≤ logits_stride and ≤ kMaxSamplingVocab
  float guidance_scale = 3.0f;
  int total_steps = 1;  // N in γ

  int* step = nullptr;  // device: the step index i
  bool advance_step = true;
  SamplingOptions sampling;

  int* tokens = nullptr;  // device [total_steps] or nullptr
  int* host_ring = nullptr;  // device alias of pinned host memory, or nullptr
  int host_ring_capacity = 0;
  int* host_ring_count = nullptr;  // device alias of one pinned int, or nullptr

  DType embedding_type = DType::kBF16;  // kBF16 or kF32
  const void* embedding = nullptr;      // [≥ vocab, embedding_dim] token embedding, or nullptr
  int embedding_dim = 0;
  float* next_input = nullptr;  // [next_input_rows, next_input_stride]
  int next_input_stride = 0;
  int next_input_rows = 0;

  float* combined_logits = nullptr;  // [vocab] or nullptr: the logits after step 1, for checks
};

Status cfg_sample_and_embed(const CfgSampleArgs& args, Stream stream);

// The uniform number in [0, 1) that step `step` of a generation seeded with
// `seed` draws (24 random bits), the same on host and device.
CUBEFORGE_HOST_DEVICE inline float sampling_uniform(std::uint64_t seed, int step) {
  std::uint64_t z = seed ^ (0x9E3779B97F4A7C15ull * (std::uint64_t(std::uint32_t(step)) + 1));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (1.0f / 16777216.0f);
}

}  // namespace cubeforge::cuda
