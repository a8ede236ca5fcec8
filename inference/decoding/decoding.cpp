// Checks and statistics shared by the decoding strategies, and the dispatch
// over a backend's sessions (the names of modes and caches: inference/options).
#include "inference/decoding/decoding.h"

#include <numeric>

namespace cubeforge {

int DecodingStats::tokens() const { return std::accumulate(tokens_per_step.begin(), tokens_per_step.end(), 0); }

double DecodingStats::tokens_per_evaluation() const {
  return model_evaluations > 0 ? double(tokens()) / double(model_evaluations) : 0.0;
}

Status check_decoding(const GptConfig& config, const DecodingOptions& options, const SamplingOptions& sampling,
                      AttentionMode attention) {
  if (options.mode == DecodingMode::kDiffusion) {
    if (!config.block_diffusion())
      return option_error(ErrorCode::kInvalidArgument, OptionKey::kDecoding,
                          "block diffusion needs a block-diffusion model (a config.yaml with "
                          "gpt_model.block_diffusion); this model is autoregressive: decode it sequentially or with "
                          "exact parallel decoding");
    if (attention == AttentionMode::kReference)
      return option_error(ErrorCode::kInvalidArgument, OptionKey::kAttention,
                          "the reference attention mode reproduces the reference's one-token decode; block diffusion "
                          "runs causal attention only");
    if (!sampling.greedy)
      return option_error(ErrorCode::kInvalidArgument, OptionKey::kSampling,
                          "block diffusion takes each position's most likely code; it has no sampling options");
    const DiffusionOptions& d = options.diffusion;
    if (d.factor > 0.f ? !(d.factor < 1e6f) : !(d.threshold >= 0.f && d.threshold <= 1.f))
      return option_error(ErrorCode::kInvalidArgument, d.factor > 0.f ? OptionKey::kFactor : OptionKey::kThreshold,
                          "the diffusion threshold must be in (0, 1] (0 takes the model's) and the factor > 0");
    if (d.block_size < 0 || d.sub_block_size < 0)
      return option_error(ErrorCode::kInvalidArgument, d.block_size < 0 ? OptionKey::kBlockSize : OptionKey::kSubBlock,
                          "block sizes must be positive");
    return ok_status();
  }
  if (config.block_diffusion())
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kDecoding,
                        "this is a block-diffusion model (gpt_model.block_diffusion in its config.yaml): it decodes "
                        "by blocks (block diffusion)");
  if (options.mode == DecodingMode::kJacobi) {
    if (!sampling.greedy)
      return option_error(ErrorCode::kInvalidArgument, OptionKey::kSampling,
                          "exact parallel decoding reproduces greedy decoding; turn sampling off or decode "
                          "sequentially");
    if (options.jacobi.max_guesses < 0 || !(options.jacobi.position_cost >= 0.f))
      return option_error(ErrorCode::kInvalidArgument,
                          options.jacobi.max_guesses < 0 ? OptionKey::kGuesses : OptionKey::kGuessCost,
                          "jacobi guesses and their cost must not be negative");
  }
  return ok_status();
}

Status check_parallel_decoding(const DecodeOptions& decode, const DecodingOptions& options, bool traced) {
  if (options.mode == DecodingMode::kSequential) return ok_status();
  if (traced)
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kTrace,
                        "a trace names the prefill's and the decode steps' intermediates; trace sequential decoding");
  if (!decode.use_kv_cache)
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kKvCache,
                        "parallel decoding runs over the KV cache (block diffusion without one: the 'none' "
                        "diffusion cache)");
  if (!decode.kv_cache.exact())
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kDecoding,
                        "parallel decoding needs the exact KV cache (f32, no budget, full rank)");
  return ok_status();
}

DiffusionOptions diffusion_options_for_model(DiffusionOptions options, const GptConfig& config) {
  if (options.threshold == 0.f)
    options.threshold = config.diffusion_threshold > 0.f ? config.diffusion_threshold : kDefaultDiffusionThreshold;
  return options;
}

float guidance_for_model(float asked, const GptConfig& config) {
  if (asked != kModelGuidance) return asked;
  return config.guidance_scale.value_or(kReferenceGuidance);
}

Result<DecodedTokens> decode_tokens(const TokenBackend& backend, std::span<const float> cond,
                                    std::span<const float> uncond, int count, const TokenGenerationOptions& generation,
                                    const DecodingOptions& options, const TokenCallback& on_token) {
  CUBEFORGE_TRY(check_decoding(backend.model().config(), options, generation.sampling, generation.attention));
  CUBEFORGE_TRY(check_parallel_decoding(generation, options, generation.trace != nullptr));
  CUBEFORGE_TRY(backend.supports({generation, options.mode, generation.trace != nullptr}));
  if (options.mode == DecodingMode::kSequential) {
    DecodedTokens out;
    CUBEFORGE_ASSIGN_OR_RETURN(out.tokens, generate_tokens(backend, cond, uncond, count, generation, on_token));
    out.stats.model_evaluations = count;
    out.stats.tokens_per_step.assign(size_t(count), 1);
    for (int i = 0; i < count; ++i) out.stats.positions_per_step.push_back(generation.use_kv_cache ? 1 : i + 1);
    return out;
  }
  const bool guided = generation.guidance_scale > 0.f;
  if (guided && uncond.size() != cond.size())
    return make_error(ErrorCode::kInvalidArgument, "guidance needs an unconditional condition of the same size");
  DecodingSessionOptions session_options;
  session_options.decoding = options.mode;
  session_options.attention = generation.attention;
  session_options.positions = count + 1;
  CUBEFORGE_ASSIGN_OR_RETURN(
      std::unique_ptr<DecodingSession> session,
      backend.open_decoding_session(session_options, cond, guided ? uncond : std::span<const float>()));
  if (options.mode == DecodingMode::kJacobi)
    return decode_jacobi(*session, count, generation.guidance_scale, options.jacobi, on_token);
  return decode_block_diffusion(*session, count, generation.guidance_scale, options.diffusion, on_token);
}

}  // namespace cubeforge
