// The end of a decode step on the device: classifier-free-guidance combine,
// token choice, and the next step's input, so no logits ever leave the GPU.
//
// One block (up to 1024 threads, fewer for small vocabularies), per step:
//   1. logits: with two rows (row 0 conditional, row 1 unconditional) at step i
//      of N, γ = s·(N − i)/N and logits = (1 + γ)·cond − γ·uncond, rounded as
//      PyTorch rounds it (γ and 1 + γ in double, cast to float; no FMA). With
//      one row the logits are used as they are. Only the first `vocab` entries
//      count (the codes; the special tokens are never chosen).
//   2. choice, with the options of inference/sampling/sampler.h: greedy is
//      the first index of the maximum, as torch.argmax. Otherwise
//      w = exp((logit − max)/temperature) (temperature at least 1e-6), then
//      - top-k (0 < k < vocab): keep logits ≥ the k-th largest;
//      - top-p (p < 1): keep the smallest set of most likely tokens whose
//        mass reaches p of the (top-k-filtered) total, always at least one;
//      - draw by inverse CDF in token order with u = sampling_uniform(seed, i).
//      This is the CPU TokenSampler's distribution, except that ties at a
//      top-k or top-p threshold are kept together (the CPU keeps the lower
//      ids), and the draw differs: a counter-based number per step (no state
//      to carry between graph replays) in token order, where the CPU walks a
//      xoshiro256** stream in probability order. Same distribution, not the
//      same tokens for a seed.
//   3. outputs: tokens[i] = token; host_ring[i % capacity] = token, then
//      *host_ring_count = i + 1 (after a system-wide fence, so a host thread
//      that sees the count sees the token); the fed token is the sampled one,
//      or forced_tokens[i] under teacher forcing: input_tokens[i + 1] = fed,
//      next_input rows ← embedding[fed]; and, when advance_step is set,
//      *step = i + 1 for the next replay. For checks, the logits of step i can
//      be kept: logits_history[i] (every row as given) and
//      combined_history[i] (after step 1).
// The step index lives in device memory, so a captured graph needs no update.
#pragma once

#include <cstdint>

#include "inference/cuda/cuda_api.h"
#include "inference/sampling/sampler.h"

#if defined(__CUDACC__)
#define CUBEFORGE_HOST_DEVICE __host__ __device__
#else
#define CUBEFORGE_HOST_DEVICE
#endif

namespace cubeforge::cuda {

// Largest vocabulary one sampling block holds in registers (16 per thread).
constexpr int kMaxSamplingVocab = 16384;

struct CfgSampleArgs {
  const float* logits = nullptr;  // [rows, logits_stride]
  int logits_stride = 0;
  int rows = 1;        // 1, or 2 for CFG (conditional first)
  int vocab = 0;       // entries considered, ≤ logits_stride and ≤ kMaxSamplingVocab
  float guidance_scale = 3.0f;
  int total_steps = 1;  // N in γ

  int* step = nullptr;  // device: the step index i
  bool advance_step = true;
  cubeforge::SamplingOptions sampling;  // greedy by default

  int* tokens = nullptr;  // device [total_steps] or nullptr
  int* host_ring = nullptr;  // device alias of pinned host memory, or nullptr
  int host_ring_capacity = 0;
  int* host_ring_count = nullptr;  // device alias of one pinned int, or nullptr

  const int* forced_tokens = nullptr;  // device [total_steps] or nullptr: fed instead of the sampled token
  int* input_tokens = nullptr;         // device [total_steps + 1] or nullptr: [i + 1] = the fed token

  DType embedding_type = DType::kBF16;  // kBF16 or kF32
  const void* embedding = nullptr;      // [≥ vocab, embedding_dim] token embedding, or nullptr
  int embedding_dim = 0;
  float* next_input = nullptr;  // [next_input_rows, next_input_stride]
  int next_input_stride = 0;
  int next_input_rows = 0;

  float* combined_logits = nullptr;  // [vocab] or nullptr: the logits after step 1, for checks
  float* logits_history = nullptr;    // [total_steps, rows, logits_stride] or nullptr
  float* combined_history = nullptr;  // [total_steps, vocab] or nullptr
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
