// The decoding options that generate and compare-decoding share: --decoding,
// exact parallel decoding's guesses, block diffusion's rule, cache and block
// sizes, and the JSON that reports a decoding.
#pragma once

#include <limits>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/option_checks.h"
#include "inference/decoding/decoding.h"

namespace cubeforge::cli {

struct DecodingArguments {
  std::string mode = "sequential";
  int guesses = JacobiOptions{}.max_guesses;
  float guess_cost = JacobiOptions{}.position_cost;
  float threshold = DiffusionOptions{}.threshold;
  float factor = 0.f;  // > 0: the factor rule instead of the threshold
  std::string cache = "dual";
  int block_size = 0;
  int sub_block_size = 0;

  // The options the strings name (checked by add_decoding_arguments).
  DecodingOptions options() const {
    DecodingOptions o;
    o.mode = parse_decoding_mode(mode).value_or(DecodingMode::kSequential);
    o.jacobi.max_guesses = guesses;
    o.jacobi.position_cost = guess_cost;
    o.diffusion.threshold = threshold;
    o.diffusion.factor = factor;
    o.diffusion.cache = parse_diffusion_cache(cache).value_or(DiffusionCache::kDual);
    o.diffusion.block_size = block_size;
    o.diffusion.sub_block_size = sub_block_size;
    return o;
  }
};

inline void add_decoding_arguments(CLI::App* cmd, DecodingArguments& a) {
  cmd->add_option("--decoding", a.mode,
                  "sequential (default), jacobi (exact parallel decoding of an autoregressive model, greedy) or "
                  "diffusion (a block-diffusion model folder)")
      ->check(CLI::IsMember({"sequential", "jacobi", "diffusion"}));
  cmd->add_option("--guesses", a.guesses, "Jacobi: tokens guessed ahead at most")
      ->check(whole_number_in(0, 64, "0 decodes one token per evaluation"));
  cmd->add_option("--guess-cost", a.guess_cost,
                  "Jacobi: what one more position costs in an evaluation, relative to one (0: always guess)")
      ->check(number_in(0.0, 100.0, false, "0 guesses at every evaluation"));
  CLI::Option* threshold =
      cmd->add_option("--threshold", a.threshold, "Diffusion: accept every position whose confidence exceeds this")
          ->check(number_in(0.0, 1.0, false, "lower accepts more tokens per evaluation"));
  cmd->add_option("--factor", a.factor, "Diffusion: the factor rule instead of a threshold")
      ->check(number_in(0.0, std::numeric_limits<double>::max(), true, "larger accepts more tokens per evaluation"))
      ->excludes(threshold);
  cmd->add_option("--diffusion-cache", a.cache, "Diffusion key-value cache: none, prefix or dual (default)")
      ->check(CLI::IsMember({"none", "prefix", "dual"}));
  cmd->add_option("--block-size", a.block_size, "Diffusion: positions per block (default: the model's)")
      ->check(whole_number_in(1, 4096, "it must divide the shape's tokens"));
  cmd->add_option("--sub-block", a.sub_block_size,
                  "Diffusion, dual cache: positions per sub-block (default: half a block)")
      ->check(whole_number_in(1, 4096, "it must divide the block size"));
}

// What a decoding did (and the options that shaped it), for --json.
inline nlohmann::json decoding_json(const DecodingStats& stats, const DecodingOptions& options) {
  nlohmann::json j = {{"mode", decoding_mode_name(stats.mode)},
                      {"model_evaluations", stats.model_evaluations},
                      {"tokens_per_evaluation", stats.tokens_per_evaluation()},
                      {"tokens_per_step", stats.tokens_per_step},
                      {"positions_per_step", stats.positions_per_step}};
  if (stats.mode == DecodingMode::kJacobi) {
    j["max_guesses"] = options.jacobi.max_guesses;
    j["guess_cost"] = options.jacobi.position_cost;
    j["guessed"] = stats.guessed;
    j["guesses_accepted"] = stats.guesses_accepted;
  } else if (stats.mode == DecodingMode::kDiffusion) {
    j["cache"] = diffusion_cache_name(options.diffusion.cache);
    if (options.diffusion.factor > 0.f)
      j["factor"] = options.diffusion.factor;
    else
      j["threshold"] = options.diffusion.threshold;
  }
  return j;
}

}  // namespace cubeforge::cli
