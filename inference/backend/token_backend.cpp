// The checks every backend applies to a session's options before it
// allocates anything.
#include "inference/backend/token_backend.h"

#include <cmath>

namespace cubeforge {

Status check_token_session_options(const DualStreamGpt& model, const TokenSessionOptions& options) {
  const GptConfig& c = model.config();
  if (options.tokens < 1) return make_error(ErrorCode::kInvalidArgument, "the number of tokens to generate must be positive");
  if (options.cond_length < 1)
    return make_error(ErrorCode::kInvalidArgument, "a session needs at least one condition row");
  if (!(options.guidance_scale >= 0.f) || !std::isfinite(options.guidance_scale))
    return make_error(ErrorCode::kInvalidArgument, "guidance must be a number >= 0");
  const SamplingOptions& s = options.sampling;
  if (!s.greedy && !(s.temperature > 0.f && std::isfinite(s.temperature)))
    return make_error(ErrorCode::kInvalidArgument, "temperature must be > 0");
  if (!s.greedy && s.top_k < 0) return make_error(ErrorCode::kInvalidArgument, "top-k must be >= 0");
  if (!(s.top_p > 0.f && s.top_p <= 1.f)) return make_error(ErrorCode::kInvalidArgument, "top-p must be in (0, 1]");
  if (options.kv_cache_type != DType::kF32 && options.kv_cache_type != DType::kBF16)
    return make_error(ErrorCode::kInvalidArgument, "the KV cache must be F32 or BF16, not " +
                                                       std::string(dtype_name(options.kv_cache_type)));
  if (!options.use_kv_cache && !options.kv_cache.exact())
    return make_error(ErrorCode::kInvalidArgument,
                      "KV cache options need the cache: recomputing every step keeps no cache to store or evict");
  CUBEFORGE_TRY(check_kv_cache_options(options.kv_cache));
  if (!options.forced_tokens.empty()) {
    if (options.forced_tokens.size() < size_t(options.tokens))
      return make_error(ErrorCode::kInvalidArgument, "teacher forcing needs one token per step");
    for (int token : options.forced_tokens)
      if (token < 0 || token >= c.vocab_size())
        return make_error(ErrorCode::kInvalidArgument, "forced token " + std::to_string(token) +
                                                           " is outside the vocabulary of " +
                                                           std::to_string(c.vocab_size()));
  }
  return ok_status();
}

}  // namespace cubeforge
