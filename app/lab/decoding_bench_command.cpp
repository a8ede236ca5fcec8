// `cubeforge-lab bench-decoding`: exact parallel (Jacobi) decoding against
// sequential greedy decoding of the same GPT and condition, in one run.
//
// It reports what one more position costs in an evaluation (evaluations of
// 1..n positions at the middle of the sequence, timed), then alternates
// sequential and Jacobi decoding of the whole sequence: the medians of both,
// the speed-up, whether the tokens agree, and Jacobi's accepted tokens per
// evaluation, with the default guessing policy and with a guess at every
// evaluation (what a backend whose extra positions cost nothing would get).
// The condition is projected random text features, as `bench` uses.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/cli/model_option.h"
#include "inference/cpu/ops.h"
#include "inference/decoding/decoding.h"
#include "inference/model/random_weights.h"
#include "inference/sampling/sampler.h"

namespace cubeforge::cli {

namespace {

struct DecodingBenchOptions {
  std::string model_dir;
  std::string shape;
  std::string dtype = "bf16";
  std::string attention = "causal";
  int tokens = 0;
  int rounds = 3;
  int guesses = JacobiOptions{}.max_guesses;
  int threads = 0;
  bool guidance = true;
  bool json = false;
  uint64_t seed = 0;
};

struct LoadedGpt {
  std::optional<DualStreamGpt> gpt;
  int tokens = 0;  // the shape tokenizer's latents: the sequence length
  std::string description;
};

Result<LoadedGpt> load_gpt(const DecodingBenchOptions& o) {
  LoadedGpt loaded;
  if (!o.model_dir.empty()) {
    const std::filesystem::path dir = o.model_dir;
    if (!std::filesystem::exists(dir / "config.yaml"))
      return make_error(ErrorCode::kNotFound, "'" + dir.string() + "' has no config.yaml to say how many tokens a shape has");
    CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig config, parse_model_config_yaml(dir / "config.yaml"));
    CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt gpt, DualStreamGpt::load(dir / "shape_gpt.safetensors", &config.gpt));
    loaded.gpt.emplace(std::move(gpt));
    loaded.tokens = config.shape.latents;
    loaded.description = readable_untrusted(dir.string());
    return loaded;
  }
  CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig config, preset_model_config(o.shape));
  const DType dtype = o.dtype == "f32" ? DType::kF32 : o.dtype == "f16" ? DType::kF16 : DType::kBF16;
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, random_weights_file(expected_gpt_tensors(config.gpt), o.seed, dtype,
                                                                       "random-" + o.shape + "-gpt"));
  CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt gpt, DualStreamGpt::from_file(std::move(file), config.gpt));
  loaded.gpt.emplace(std::move(gpt));
  loaded.tokens = config.shape.latents;
  loaded.description = "random " + o.shape + " (" + std::string(dtype_name(dtype)) + ")";
  return loaded;
}

struct JacobiRun {
  std::vector<double> ms;
  std::optional<DecodedTokens> decoded;
};

int run_decoding_bench(const DecodingBenchOptions& o) {
  if (o.model_dir.empty() == o.shape.empty()) {
    std::fprintf(stderr, "bench-decoding: give either --model DIR or --shape small|v01|v05\n");
    return 2;
  }
  cpu::set_thread_count(o.threads);
  auto loaded = load_gpt(o);
  if (!loaded.ok()) {
    print_error("bench-decoding", loaded.error());
    return 1;
  }
  const DualStreamGpt& gpt = *loaded->gpt;
  const GptConfig& c = gpt.config();
  if (c.block_diffusion()) {
    std::fprintf(stderr, "bench-decoding: %s is a block-diffusion model; this compares decodings of an "
                 "autoregressive one (generate --decoding diffusion --json reports block diffusion)\n",
                 loaded->description.c_str());
    return 2;
  }
  const int count = o.tokens > 0 ? std::min(o.tokens, loaded->tokens) : loaded->tokens;
  const AttentionMode attention = o.attention == "reference" ? AttentionMode::kReference : AttentionMode::kCausal;

  // A condition of plausible scale: projected random text features.
  const int text_tokens = 77;
  std::vector<float> text(size_t(text_tokens) * size_t(c.text_width));
  Xoshiro256 rng(o.seed + 1);
  for (auto& v : text) v = float(rng.uniform() * 2.0 - 1.0);
  auto cond = gpt.project_condition(text, nullptr);
  auto uncond = gpt.project_condition(std::vector<float>(text.size(), 0.f), nullptr);
  if (!cond.ok() || !uncond.ok()) {
    std::fprintf(stderr, "bench-decoding: %s\n", (cond.ok() ? uncond.error() : cond.error()).to_string().c_str());
    return 1;
  }
  const float guidance = o.guidance ? 3.0f : 0.0f;
  std::span<const float> unconditional = o.guidance ? std::span<const float>(*uncond) : std::span<const float>();

  // What positions cost: evaluations of 1..n positions from the middle of the sequence.
  const int middle = std::max(1, count / 2);
  const int widest = std::min(o.guesses + 1, count - middle);
  std::vector<double> position_ms;
  {
    CpuDecodingSession session(gpt, *cond, unconditional, count + 1, attention);
    std::vector<int> prefix(size_t(middle), 0);
    prefix[0] = c.bos_id();
    std::vector<float> logits(size_t(session.rows()) * size_t(c.vocab_size()));
    if (Status s = session.prefill(prefix, logits); !s.ok()) {
      print_error("bench-decoding", s.error());
      return 1;
    }
    for (int n = 1; n <= widest; ++n) {
      std::vector<int> feed(static_cast<size_t>(n), 1), visible(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) visible[size_t(i)] = middle + i + 1;
      logits.resize(size_t(session.rows()) * size_t(n) * size_t(c.vocab_size()));
      std::vector<double> times;
      for (int repeat = 0; repeat < 7; ++repeat) {
        const auto start = std::chrono::steady_clock::now();
        Status s = session.evaluate(middle, feed, visible, logits);
        times.push_back(ms_since(start));
        if (!s.ok() || !session.truncate(middle).ok()) {
          std::fprintf(stderr, "bench-decoding: %s\n", s.ok() ? "truncate failed" : s.error().to_string().c_str());
          return 1;
        }
      }
      position_ms.push_back(median(times));
    }
  }

  // Alternating whole decodes.
  TokenGenerationOptions generation;
  generation.guidance_scale = guidance;
  generation.attention = attention;
  JacobiOptions adaptive;
  adaptive.max_guesses = o.guesses;
  JacobiOptions always = adaptive;
  always.position_cost = 0.f;
  std::vector<double> sequential_ms;
  std::vector<int> sequential_tokens;
  JacobiRun adaptive_run, always_run;
  auto jacobi = [&](const JacobiOptions& options, JacobiRun& run) -> Status {
    CpuDecodingSession session(gpt, *cond, unconditional, count + 1, attention);
    const auto start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(DecodedTokens decoded, decode_jacobi(session, count, guidance, options));
    run.ms.push_back(ms_since(start));
    run.decoded = std::move(decoded);
    return ok_status();
  };
  for (int round = 0; round < o.rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    auto tokens = generate_tokens(gpt, *cond, unconditional, count, generation);
    sequential_ms.push_back(ms_since(start));
    if (!tokens.ok()) {
      print_error("bench-decoding", tokens.error());
      return 1;
    }
    sequential_tokens = *tokens;
    for (auto [options, run] : {std::pair{&adaptive, &adaptive_run}, std::pair{&always, &always_run}}) {
      if (Status s = jacobi(*options, *run); !s.ok()) {
        print_error("bench-decoding", s.error());
        return 1;
      }
    }
  }
  auto run_json = [&](const JacobiRun& run) {
    const DecodingStats& stats = run.decoded->stats;
    const double ms = median(run.ms);
    return nlohmann::json{{"ms_median", ms},
                          {"speedup_over_sequential", ms > 0 ? median(sequential_ms) / ms : 0.0},
                          {"tokens_equal_sequential", run.decoded->tokens == sequential_tokens},
                          {"model_evaluations", stats.model_evaluations},
                          {"tokens_per_evaluation", stats.tokens_per_evaluation()},
                          {"guessed", stats.guessed},
                          {"guesses_accepted", stats.guesses_accepted},
                          {"tokens_per_step", stats.tokens_per_step}};
  };
  std::vector<double> relative;
  for (double ms : position_ms) relative.push_back(position_ms[0] > 0 ? ms / position_ms[0] : 0.0);
  nlohmann::json report = {
      {"model", loaded->description},
      {"threads", cpu::thread_count()},
      {"kernel_isa", cpu::kernel_isa()},
      {"attention", o.attention},
      {"guidance", guidance},
      {"tokens", count},
      {"rounds", o.rounds},
      {"evaluation_ms_by_positions", position_ms},
      {"evaluation_cost_by_positions", relative},
      {"sequential_ms_median", median(sequential_ms)},
      {"jacobi", run_json(adaptive_run)},
      {"jacobi_guessing_always", run_json(always_run)},
  };
  report["jacobi"]["position_cost"] = adaptive.position_cost;
  if (o.json) {
    std::cout << json_line(report) << std::endl;
    return 0;
  }
  std::printf("model               %s, %d tokens, %s attention, guidance %.1f\n", loaded->description.c_str(), count,
              o.attention.c_str(), guidance);
  std::printf("evaluation cost     ");
  for (size_t i = 0; i < relative.size(); ++i) std::printf("%zu: %.2f  ", i + 1, relative[i]);
  std::printf("(positions: time relative to one)\n");
  std::printf("sequential          %.1f ms\n", median(sequential_ms));
  for (auto [name, run] : {std::pair{"jacobi", &adaptive_run}, std::pair{"jacobi, always guess", &always_run}}) {
    const DecodingStats& stats = run->decoded->stats;
    std::printf("%-19s %.1f ms (%.2fx), %d evaluations, %.2f tokens per evaluation, %d of %d guesses right, %s\n",
                name, median(run->ms), median(sequential_ms) / std::max(1e-9, median(run->ms)),
                stats.model_evaluations, stats.tokens_per_evaluation(), stats.guesses_accepted, stats.guessed,
                run->decoded->tokens == sequential_tokens ? "the same tokens" : "DIFFERENT TOKENS");
  }
  return 0;
}

}  // namespace

Action add_decoding_bench_command(CLI::App& app) {
  auto options = std::make_shared<DecodingBenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench-decoding", "Compare exact parallel (Jacobi) and sequential decoding");
  cmd->add_option("--model", options->model_dir, "Model folder (shape_gpt.safetensors and config.yaml)");
  cmd->add_option("--shape", options->shape, "Random-weight model instead: small, v01 or v05")
      ->check(CLI::IsMember({"small", "v01", "v05"}));
  cmd->add_option("--dtype", options->dtype, "Random weights precision")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--tokens", options->tokens, "Decode this many tokens (default: a whole shape)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--rounds", options->rounds, "Alternating rounds of each decoding")->check(CLI::Range(1, 1000));
  cmd->add_option("--guesses", options->guesses, "Jacobi: tokens guessed ahead at most")->check(CLI::Range(0, 64));
  cmd->add_option("--attention", options->attention, "causal or reference")
      ->check(CLI::IsMember({"causal", "reference"}));
  cmd->add_option("--threads", options->threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--seed", options->seed, "Seed for random weights and the condition");
  cmd->add_flag("!--no-guidance", options->guidance, "One row instead of the guidance pair");
  cmd->add_flag("--json", options->json, "Print one JSON object");
  return [cmd, options]() -> int { return cmd->parsed() ? run_decoding_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
