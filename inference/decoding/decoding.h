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
//               one-token step computes (GptSession::evaluate).
//   diffusion   a block-diffusion model (config block_diffusion): each block
//               of positions starts masked and fills in over a few
//               evaluations, accepting every position whose confidence passes
//               a rule (Fast-dLLM's threshold or factor rule), with or
//               without a cache of what earlier evaluations computed.
//
// Guidance: with a scale > 0 the session has two rows and token t is chosen
// from the combined logits with γ for step t of N (combine_guidance), in every
// strategy.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inference/core/result.h"
#include "inference/decoding/decoding_session.h"
#include "inference/backend/generate.h"

namespace cubeforge {

enum class DecodingMode { kSequential, kJacobi, kDiffusion };
const char* decoding_mode_name(DecodingMode mode);
std::optional<DecodingMode> parse_decoding_mode(std::string_view name);

struct JacobiOptions {
  int max_guesses = 4;  // tokens guessed past the last accepted one, at most
  // The cost of one more position in an evaluation, as a fraction of a
  // one-token evaluation. Guesses are made only while the acceptance seen so
  // far makes them pay at this price; otherwise the strategy decodes one
  // token per evaluation and tries one guess now and then. The default is the
  // CPU session's (`cubeforge-cli bench-decoding` measures it); 0 guesses at
  // every evaluation.
  float position_cost = 0.75f;
  int probe_interval = 32;  // evaluations without guesses between two probes
};

// Block diffusion's key-value cache (Fast-dLLM):
//   none    every evaluation recomputes every position up to the current
//           block's end;
//   prefix  the finished blocks' keys and values are kept (each block is
//           evaluated once more with its final tokens at the next block's
//           first evaluation); exact for a block-causal model;
//   dual    also the rest of the current block: the block decodes in
//           sub-blocks, the whole block is evaluated once at each sub-block's
//           start, and the sub-block's further evaluations reuse the other
//           positions' keys and values from then (the masked suffix
//           included), as Fast-dLLM v2's sub-block cache. Approximate.
enum class DiffusionCache { kNone, kPrefix, kDual };
const char* diffusion_cache_name(DiffusionCache cache);
std::optional<DiffusionCache> parse_diffusion_cache(std::string_view name);

struct DiffusionOptions {
  // Confidence rule: accept every masked position whose confidence (the
  // probability of its most likely code) exceeds the threshold, and at least
  // the most confident one. Factor rule (factor > 0): sort by confidence and
  // accept the top n while confidence_n >= 1 - factor / (n + 1), at least one.
  float threshold = 0.9f;
  float factor = 0.f;
  DiffusionCache cache = DiffusionCache::kDual;
  int block_size = 0;      // 0: the model's
  int sub_block_size = 0;  // dual cache; 0: half the block
};

struct DecodingOptions {
  DecodingMode mode = DecodingMode::kSequential;
  JacobiOptions jacobi;
  DiffusionOptions diffusion;
};

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

// Greedy exact parallel decoding of `count` tokens. The session is fresh.
// TokenEvent::step is the evaluation that accepted the token.
Result<DecodedTokens> decode_jacobi(DecodingSession& session, int count, float guidance_scale,
                                    const JacobiOptions& options, const TokenCallback& on_token = {});

// Block diffusion of `count` tokens (a whole number of blocks).
Result<DecodedTokens> decode_block_diffusion(DecodingSession& session, int count, float guidance_scale,
                                             const DiffusionOptions& options, const TokenCallback& on_token = {});

// The strategy `options.mode`: generate_tokens for sequential, on `backend`
// (the CPU backend when null; its statistics filled in), the functions above,
// on the CPU with the exact KV cache, otherwise.
Result<DecodedTokens> decode_tokens(const DualStreamGpt& model, const TokenBackend* backend,
                                    std::span<const float> cond, std::span<const float> uncond, int count,
                                    const TokenGenerationOptions& generation, const DecodingOptions& options,
                                    const TokenCallback& on_token = {});

}  // namespace cubeforge
