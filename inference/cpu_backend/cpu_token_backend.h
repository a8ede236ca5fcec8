// The CPU backend of the token seam (backend/token_backend.h): always
// available, and the one every parallel decoding strategy runs on.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "inference/backend/generate.h"
#include "inference/backend/token_backend.h"
#include "inference/core/result.h"
#include "inference/model/gpt.h"

namespace cubeforge {

// The CPU backend over a loaded model, which must outlive it.
std::shared_ptr<TokenBackend> make_cpu_token_backend(const DualStreamGpt& model);

// generate_tokens (backend/generate.h) on the CPU backend.
Result<std::vector<int>> generate_tokens(const DualStreamGpt& model, std::span<const float> cond,
                                         std::span<const float> uncond, int tokens,
                                         const TokenGenerationOptions& options, const TokenCallback& on_token = {},
                                         TokenTrace* trace = nullptr, std::span<const int> forced_tokens = {});

}  // namespace cubeforge
