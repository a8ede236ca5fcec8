// Decoding strategies: how the shape tokens come out of the GPT.
//
//   sequential  one token per model evaluation (generate_tokens in backend/generate.h).
//   jacobi      exact parallel decoding of an autoregressive model: each
//               evaluation feeds the last token and guesses for the next ones
//               (from an n-gram pool of this generation, or the previous
//               evaluation's outputs past the accepted ones, as in Jacobi and
//               lookahead decoding), keeps every output that greedy decoding
//               would have produced, and cuts the cache back past the rest.
//               The tokens are greedy decoding's, bit for bit, by
//               construction: each verified row's logits are the ones a
//               one-token step computes (DecodingSession::evaluate).
//   diffusion   a block-diffusion model (config block_diffusion): each block
//               of positions starts masked and fills in over a few
//               evaluations, accepting every position whose confidence passes
//               a rule (Fast-dLLM's threshold or factor rule), with or
//               without a cache of what earlier evaluations computed.
//
// Guidance: with a scale > 0 the session has two rows and token t is chosen
// from the combined logits with γ for step t of N (combine_guidance), in every
// strategy.
//
// Every strategy runs on a backend (backend/token_backend.h): sequential
// decoding over its token session, the parallel ones over the decoding
// session it opens (backend/decoding_session.h), which a backend that cannot
// evaluate several positions at once refuses.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inference/backend/decoding_session.h"
#include "inference/backend/generate.h"
#include "inference/backend/token_backend.h"
#include "inference/core/result.h"

namespace cubeforge {

struct DecodingStats {
  DecodingMode mode = DecodingMode::kSequential;
  int model_evaluations = 0;             // GPT passes that produced logits (the first included)
  std::vector<int> tokens_per_step;      // tokens each of them accepted
  std::vector<int> positions_per_step;   // positions each of them evaluated
  int guessed = 0, guesses_accepted = 0;  // jacobi

  int tokens() const;
  double tokens_per_evaluation() const;
};

struct DecodedTokens {
  std::vector<int> tokens;
  DecodingStats stats;
};

// Checks that a strategy fits a model: jacobi needs an autoregressive model
// and greedy sampling, diffusion a block-diffusion model (and causal
// attention), sequential an autoregressive model.
Status check_decoding(const GptConfig& config, const DecodingOptions& options, const SamplingOptions& sampling,
                      AttentionMode attention);
// What parallel decoding needs of the decode options on any backend: the
// exact KV cache, and no trace; ok for sequential decoding.
Status check_parallel_decoding(const DecodeOptions& decode, const DecodingOptions& options, bool traced);

// Greedy exact parallel decoding of `count` tokens. The session is fresh.
// TokenEvent::step is the evaluation that accepted the token.
Result<DecodedTokens> decode_jacobi(DecodingSession& session, int count, float guidance_scale,
                                    const JacobiOptions& options, const TokenCallback& on_token = {});

// The confidence threshold block diffusion runs at when the options leave it
// to the model (threshold 0) and the model's config.yaml names none.
constexpr float kDefaultDiffusionThreshold = 0.9f;
// `options` with what they leave to the model filled in from `config`: the
// threshold (the config's gpt_model.block_diffusion.threshold, else
// kDefaultDiffusionThreshold). A factor rule keeps its factor.
DiffusionOptions diffusion_options_for_model(DiffusionOptions options, const GptConfig& config);
// The guidance scale a generation runs at: `asked`, or when it is left to the
// model (kModelGuidance) the config's gpt_model.guidance_scale, else the
// reference's.
float guidance_for_model(float asked, const GptConfig& config);

// Block diffusion of `count` tokens (a whole number of blocks); a threshold
// left to the model is the model's (diffusion_options_for_model).
Result<DecodedTokens> decode_block_diffusion(DecodingSession& session, int count, float guidance_scale,
                                             const DiffusionOptions& options, const TokenCallback& on_token = {});

// The strategy `options.mode` on `backend`: generate_tokens for sequential
// (its statistics filled in), the functions above over the decoding session
// the backend opens otherwise. A backend that does not support the request
// (TokenBackend::supports) refuses it before anything runs.
Result<DecodedTokens> decode_tokens(const TokenBackend& backend, std::span<const float> cond,
                                    std::span<const float> uncond, int count, const TokenGenerationOptions& generation,
                                    const DecodingOptions& options, const TokenCallback& on_token = {});

}  // namespace cubeforge
