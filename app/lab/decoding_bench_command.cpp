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
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/cli/model_option.h"
#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/cpu_decoding_session.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/decoding/decoding.h"
#include "inference/model/random_weights.h"
#include "inference/sampling/sampler.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kDecodingBenchCommand = "bench-decoding";

struct DecodingBenchOptions {
  LabOptions lab;
  std::string shape;  // random weights of a preset's sizes instead of a model folder
  std::string dtype = "bf16";
  std::string attention = "causal";
  int tokens = 0;
  int rounds = 3;
  int guesses = JacobiOptions{}.max_guesses;
  bool guidance = true;
  uint64_t seed = 0;
};

struct LoadedGpt {
  std::optional<DualStreamGpt> gpt;
  int tokens = 0;  // the shape tokenizer's latents: the sequence length
  std::string description;
};

Result<LoadedGpt> load_gpt(const DecodingBenchOptions& o, const std::filesystem::path& dir) {
  LoadedGpt loaded;
  if (o.shape.empty()) {
    if (!std::filesystem::exists(dir / "config.yaml"))
      return make_error(ErrorCode::kNotFound,
                        "'" + dir.string() + "' has no config.yaml to say how many tokens a shape has");
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

// What every decoding of the run shares: the GPT, the conditions, the length.
struct DecodingBenchPlan {
  LoadedGpt loaded;
  int count = 0;
  AttentionMode attention = AttentionMode::kCausal;
  float guidance = 0.f;
  std::vector<float> cond, uncond;
  std::span<const float> unconditional() const {
    return guidance > 0.f ? std::span<const float>(uncond) : std::span<const float>();
  }
};

// Exit status 0 with the plan filled, else the status to exit with (after saying why).
int plan_decoding_bench(const DecodingBenchOptions& o, DecodingBenchPlan& plan) {
  apply_lab_threads(o.lab);
  std::filesystem::path folder;
  if (o.shape.empty()) {
    const auto resolved = lab_model_folder(o.lab, kDecodingBenchCommand);
    if (!resolved) return 2;
    folder = *resolved;
  }
  auto loaded = load_gpt(o, folder);
  if (!loaded.ok()) {
    print_error(kDecodingBenchCommand, loaded.error());
    return 1;
  }
  plan.loaded = std::move(*loaded);
  const DualStreamGpt& gpt = *plan.loaded.gpt;
  if (gpt.config().block_diffusion()) {
    std::fprintf(stderr,
                 "%s: %s is a block-diffusion model; this compares decodings of an autoregressive one "
                 "(generate --decoding diffusion --json reports block diffusion)\n",
                 kDecodingBenchCommand, plan.loaded.description.c_str());
    return 2;
  }
  plan.count = o.tokens > 0 ? std::min(o.tokens, plan.loaded.tokens) : plan.loaded.tokens;
  plan.attention = o.attention == "reference" ? AttentionMode::kReference : AttentionMode::kCausal;
  plan.guidance = o.guidance ? 3.0f : 0.0f;
  // A condition of plausible scale: projected random text features.
  const int text_tokens = 77;
  std::vector<float> text(size_t(text_tokens) * size_t(gpt.config().text_width));
  Xoshiro256 rng(o.seed + 1);
  for (auto& v : text) v = float(rng.uniform() * 2.0 - 1.0);
  auto cond = gpt.project_condition(text, nullptr);
  auto uncond = gpt.project_condition(std::vector<float>(text.size(), 0.f), nullptr);
  if (!cond.ok() || !uncond.ok()) {
    print_error(kDecodingBenchCommand, cond.ok() ? uncond.error() : cond.error());
    return 1;
  }
  plan.cond = std::move(*cond);
  plan.uncond = std::move(*uncond);
  return 0;
}

// What positions cost: evaluations of 1..n positions from the middle of the
// sequence (n: the guesses and the token they follow), medians of 7.
Result<std::vector<double>> measure_position_costs(const DecodingBenchPlan& plan, int guesses) {
  const DualStreamGpt& gpt = *plan.loaded.gpt;
  const GptConfig& c = gpt.config();
  const int middle = std::max(1, plan.count / 2);
  const int widest = std::min(guesses + 1, plan.count - middle);
  CpuDecodingSession session(gpt, plan.cond, plan.unconditional(), plan.count + 1, plan.attention);
  std::vector<int> prefix(size_t(middle), 0);
  prefix[0] = c.bos_id();
  std::vector<float> logits(size_t(session.rows()) * size_t(c.vocab_size()));
  CUBEFORGE_TRY(session.prefill(prefix, logits));
  std::vector<double> position_ms;
  for (int n = 1; n <= widest; ++n) {
    std::vector<int> feed(static_cast<size_t>(n), 1), visible(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) visible[size_t(i)] = middle + i + 1;
    logits.resize(size_t(session.rows()) * size_t(n) * size_t(c.vocab_size()));
    std::vector<double> times;
    for (int repeat = 0; repeat < 7; ++repeat) {
      const auto start = std::chrono::steady_clock::now();
      CUBEFORGE_TRY(session.evaluate(middle, feed, visible, logits));
      times.push_back(ms_since(start));
      CUBEFORGE_TRY(session.truncate(middle));
    }
    position_ms.push_back(median(times));
  }
  return position_ms;
}

struct DecodingRuns {
  std::vector<double> sequential_ms;
  std::vector<int> sequential_tokens;
  JacobiOptions adaptive, always;  // the default guessing policy; a guess at every evaluation
  JacobiRun adaptive_run, always_run;
};

// Sequential, then Jacobi with each policy, round by round.
Result<DecodingRuns> measure_decodings(const DecodingBenchPlan& plan, const DecodingBenchOptions& o) {
  const DualStreamGpt& gpt = *plan.loaded.gpt;
  TokenGenerationOptions generation;
  generation.guidance_scale = plan.guidance;
  generation.attention = plan.attention;
  DecodingRuns runs;
  runs.adaptive.max_guesses = o.guesses;
  runs.always = runs.adaptive;
  runs.always.position_cost = 0.f;
  auto jacobi = [&](const JacobiOptions& options, JacobiRun& run) -> Status {
    CpuDecodingSession session(gpt, plan.cond, plan.unconditional(), plan.count + 1, plan.attention);
    const auto start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(DecodedTokens decoded, decode_jacobi(session, plan.count, plan.guidance, options));
    run.ms.push_back(ms_since(start));
    run.decoded = std::move(decoded);
    return ok_status();
  };
  for (int round = 0; round < o.rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(runs.sequential_tokens,
                               generate_tokens(gpt, plan.cond, plan.unconditional(), plan.count, generation));
    runs.sequential_ms.push_back(ms_since(start));
    CUBEFORGE_TRY(jacobi(runs.adaptive, runs.adaptive_run));
    CUBEFORGE_TRY(jacobi(runs.always, runs.always_run));
  }
  return runs;
}

void report_decoding_bench(const DecodingBenchOptions& o, const DecodingBenchPlan& plan,
                           const std::vector<double>& position_ms, const DecodingRuns& runs) {
  const double sequential_ms = median(runs.sequential_ms);
  auto run_json = [&](const JacobiRun& run) {
    const DecodingStats& stats = run.decoded->stats;
    const double ms = median(run.ms);
    return nlohmann::json{{"ms_median", ms},
                          {"speedup_over_sequential", ms > 0 ? sequential_ms / ms : 0.0},
                          {"tokens_equal_sequential", run.decoded->tokens == runs.sequential_tokens},
                          {"model_evaluations", stats.model_evaluations},
                          {"tokens_per_evaluation", stats.tokens_per_evaluation()},
                          {"guessed", stats.guessed},
                          {"guesses_accepted", stats.guesses_accepted},
                          {"tokens_per_step", stats.tokens_per_step}};
  };
  std::vector<double> relative;
  for (double ms : position_ms) relative.push_back(position_ms[0] > 0 ? ms / position_ms[0] : 0.0);
  if (o.lab.json) {
    nlohmann::json results = {
        {"model", plan.loaded.description},
        {"attention", o.attention},
        {"guidance", plan.guidance},
        {"tokens", plan.count},
        {"rounds", o.rounds},
        {"evaluation_ms_by_positions", position_ms},
        {"evaluation_cost_by_positions", relative},
        {"sequential_ms_median", sequential_ms},
        {"jacobi", run_json(runs.adaptive_run)},
        {"jacobi_guessing_always", run_json(runs.always_run)},
    };
    results["jacobi"]["position_cost"] = runs.adaptive.position_cost;
    print_lab_report(kDecodingBenchCommand, results);
    return;
  }
  std::printf("model               %s, %d tokens, %s attention, guidance %.1f\n", plan.loaded.description.c_str(),
              plan.count, o.attention.c_str(), plan.guidance);
  std::printf("evaluation cost     ");
  for (size_t i = 0; i < relative.size(); ++i) std::printf("%zu: %.2f  ", i + 1, relative[i]);
  std::printf("(positions: time relative to one)\n");
  std::printf("sequential          %.1f ms\n", sequential_ms);
  for (auto [name, run] :
       {std::pair{"jacobi", &runs.adaptive_run}, std::pair{"jacobi, always guess", &runs.always_run}}) {
    const DecodingStats& stats = run->decoded->stats;
    std::printf("%-19s %.1f ms (%.2fx), %d evaluations, %.2f tokens per evaluation, %d of %d guesses right, %s\n", name,
                median(run->ms), sequential_ms / std::max(1e-9, median(run->ms)), stats.model_evaluations,
                stats.tokens_per_evaluation(), stats.guesses_accepted, stats.guessed,
                run->decoded->tokens == runs.sequential_tokens ? "the same tokens" : "DIFFERENT TOKENS");
  }
}

int run_decoding_bench(const DecodingBenchOptions& o) {
  DecodingBenchPlan plan;
  if (int status = plan_decoding_bench(o, plan); status != 0) return status;
  auto position_ms = measure_position_costs(plan, o.guesses);
  auto runs = position_ms.ok() ? measure_decodings(plan, o) : Result<DecodingRuns>(position_ms.error());
  if (!runs.ok()) {
    print_error(kDecodingBenchCommand, runs.error());
    return 1;
  }
  report_decoding_bench(o, plan, *position_ms, *runs);
  return 0;
}

}  // namespace

Action add_decoding_bench_command(CLI::App& app) {
  auto options = std::make_shared<DecodingBenchOptions>();
  CLI::App* cmd = app.add_subcommand(kDecodingBenchCommand, "Compare exact parallel (Jacobi) and sequential decoding");
  CLI::Option* model = add_lab_options(cmd, options->lab, kModelOption | kThreadsOption | kJsonOption);
  add_shape_option(cmd, options->shape, model, "Random-weight model instead: small, v01 or v05");
  cmd->add_option("--dtype", options->dtype, "Random weights precision")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--tokens", options->tokens, "Decode this many tokens (default: a whole shape)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--rounds", options->rounds, "Alternating rounds of each decoding")->check(CLI::Range(1, 1000));
  cmd->add_option("--guesses", options->guesses, "Jacobi: tokens guessed ahead at most")->check(CLI::Range(0, 64));
  cmd->add_option("--attention", options->attention, "causal or reference")
      ->check(CLI::IsMember({"causal", "reference"}));
  cmd->add_option("--seed", options->seed, "Seed for random weights and the condition");
  cmd->add_flag("!--no-guidance", options->guidance, "One row instead of the guidance pair");
  return [cmd, options]() -> int { return cmd->parsed() ? run_decoding_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
