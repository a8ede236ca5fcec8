// The decoding options that generate and compare-decoding share: --decoding,
// exact parallel decoding's guesses, block diffusion's rule, cache and block
// sizes (the JSON that reports a decoding: inference/pipeline/generation_report.h).
#pragma once

#include <CLI/CLI.hpp>
#include <limits>
#include <string>

#include "app/cli/commands.h"
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

// `research`: all but --decoding in the research group (commands.h).
inline void add_decoding_arguments(CLI::App* cmd, DecodingArguments& a, bool research = false) {
  cmd->add_option("--decoding", a.mode,
                  "sequential (default), jacobi (exact parallel decoding of an autoregressive model, greedy) or "
                  "diffusion (a block-diffusion model folder)")
      ->check(CLI::IsMember({"sequential", "jacobi", "diffusion"}));
  in_research_group(cmd->add_option("--guesses", a.guesses, "Jacobi: tokens guessed ahead at most"), research)
      ->check(whole_number_in(0, 64, "0 decodes one token per evaluation"));
  in_research_group(
      cmd->add_option("--guess-cost", a.guess_cost,
                      "Jacobi: what one more position costs in an evaluation, relative to one (0: always guess)"),
      research)
      ->check(number_in(0.0, 100.0, false, "0 guesses at every evaluation"));
  CLI::Option* threshold =
      in_research_group(
          cmd->add_option("--threshold", a.threshold,
                          "Diffusion: accept every position whose confidence exceeds this (default: the model's, "
                          "0.9 where its config.yaml names none)"),
          research)
          ->check(number_in(0.0, 1.0, false, "lower accepts more tokens per evaluation"));
  in_research_group(cmd->add_option("--factor", a.factor, "Diffusion: the factor rule instead of a threshold"),
                    research)
      ->check(number_in(0.0, std::numeric_limits<double>::max(), true, "larger accepts more tokens per evaluation"))
      ->excludes(threshold);
  in_research_group(
      cmd->add_option("--diffusion-cache", a.cache, "Diffusion key-value cache: none, prefix or dual (default)"),
      research)
      ->check(CLI::IsMember({"none", "prefix", "dual"}));
  in_research_group(
      cmd->add_option("--block-size", a.block_size, "Diffusion: positions per block (default: the model's)"), research)
      ->check(whole_number_in(1, 4096, "it must divide the shape's tokens"));
  in_research_group(cmd->add_option("--sub-block", a.sub_block_size,
                                    "Diffusion, dual cache: positions per sub-block (default: half a block)"),
                    research)
      ->check(whole_number_in(1, 4096, "it must divide the block size"));
}

}  // namespace cubeforge::cli
