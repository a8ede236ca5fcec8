// The checks every backend applies to a session's options before it
// allocates anything.
#include "inference/backend/token_backend.h"

namespace cubeforge {

const char* backend_kind_name(BackendKind kind) { return kind == BackendKind::kCuda ? "cuda" : "cpu"; }

Status check_token_session_options(const DualStreamGpt& model, const TokenSessionOptions& options) {
  const GptConfig& c = model.config();
  if (options.tokens < 1) return make_error(ErrorCode::kInvalidArgument, "the number of tokens to generate must be positive");
  if (options.cond_length < 1)
    return make_error(ErrorCode::kInvalidArgument, "a session needs at least one condition row");
  CUBEFORGE_TRY(check_decode_options(options));
  if (options.guidance_left_to_model())
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kGuidance,
                        "the guidance scale was left to the model but never settled (guidance_for_model)");
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

Status check_decoding_session_options(const DualStreamGpt& model, const DecodingSessionOptions& options,
                                      std::span<const float> cond, std::span<const float> uncond) {
  if (options.decoding == DecodingMode::kSequential)
    return make_error(ErrorCode::kInvalidArgument,
                      "a decoding session serves exact parallel decoding or block diffusion; sequential decoding "
                      "runs a token session");
  if (options.positions < 2)
    return make_error(ErrorCode::kInvalidArgument, "a decoding session holds BOS and at least one token; " +
                                                       std::to_string(options.positions) + " positions were asked for");
  const size_t width = size_t(model.config().width);
  if (cond.empty() || cond.size() % width != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "the condition is not a whole number of width-" + std::to_string(width) + " rows");
  if (!uncond.empty() && uncond.size() != cond.size())
    return make_error(ErrorCode::kInvalidArgument, "guidance needs an unconditional condition of the same size");
  return ok_status();
}

BackendRequest decoding_session_request(const DecodingSessionOptions& options, bool guided) {
  BackendRequest request;
  request.decode.attention = options.attention;
  if (!guided) request.decode.guidance_scale = 0.f;
  request.decoding = options.decoding;
  return request;
}

}  // namespace cubeforge
