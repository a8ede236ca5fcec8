// The autoregressive loop over the token seam: BOS → prefill → one token per
// step with guidance, on whichever backend runs the GPT.
//
// Always emits exactly `tokens` ids (the shape tokenizer's latent count); the
// reference never generates EOS. With guidance > 0 the session runs two rows
// (conditional, unconditional) and the chosen token is fed to both. A device
// backend runs a few steps ahead of the host (kStepsInFlight); the callback
// sees every token in order as it lands, and returning false stops the loop
// at once (the steps still in flight are discarded).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "inference/backend/token_backend.h"
#include "inference/core/result.h"
#include "inference/model/gpt.h"
#include "inference/sampling/sampler.h"

namespace cubeforge {

// The decode options whole, and what to trace.
struct TokenGenerationOptions : DecodeOptions {
  // Named intermediates (inference/tensor/trace.h) of the prefill, as
  // "prefill.<name>", and of the first `trace_decode_steps` decode steps, as
  // "decode.<t>.<name>" for the step producing token t; null: off.
  TraceSink* trace = nullptr;
  int trace_decode_steps = 2;
};

struct TokenEvent {
  int index = 0;        // 0-based position of the token
  int token = 0;
  double step_ms = 0;   // time from the previous token (from the start for index 0, the prefill)
  int step = 0;         // the model evaluation that chose it: its index here, fewer with parallel decoding
};

// Return false to cancel; generation then ends with ErrorCode::kCancelled.
using TokenCallback = std::function<bool(const TokenEvent&)>;

// Per-step numbers, for tests against the reference.
struct TokenTrace {
  std::vector<float> combined_logits;  // [T, V]
  std::vector<float> raw_logits;       // [B, T, V + 3]
};

// Steps a device may run ahead of the tokens the host has seen.
constexpr int kStepsInFlight = 8;

// cond/uncond: [S, d] each (uncond ignored when guidance_scale == 0).
// `forced_tokens`, when given, are fed instead of the sampled ones (teacher
// forcing), while the returned ids are still the sampled ones.
Result<std::vector<int>> generate_tokens(const TokenBackend& backend, std::span<const float> cond,
                                         std::span<const float> uncond, int tokens,
                                         const TokenGenerationOptions& options, const TokenCallback& on_token = {},
                                         TokenTrace* trace = nullptr, std::span<const int> forced_tokens = {});

}  // namespace cubeforge
