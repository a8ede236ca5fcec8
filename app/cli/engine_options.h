// The engine's weight and KV cache options on the command line, shared by
// generate, bench and compare: --weights stored|bf16|q8|q4 (--q4-group),
// --kv-cache f32|bf16|fp8|int8, --kv-budget N, --kv-rank R. Each defaults to
// the exact setting. bench and compare take lists and run every combination.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "inference/backend/token_backend.h"
#include "inference/core/result.h"
#include "inference/model/gpt.h"
#include "inference/model/kv_bases.h"

namespace cubeforge::cli {

struct EngineFlags {
  std::string weights = "stored";
  int64_t q4_group = 32;
  std::string kv_cache = "f32";
  int kv_budget = 0;
  int kv_rank = 0;

  // The default: exact against the reference.
  bool exact() const { return weights == "stored" && kv_exact(); }
  // The KV cache keeps every position at full rank in f32.
  bool kv_exact() const { return kv_cache == "f32" && kv_budget == 0 && kv_rank == 0; }

  std::string label() const {
    std::string s = weights + "/" + kv_cache;
    if (kv_budget) s += "/budget " + std::to_string(kv_budget);
    if (kv_rank) s += "/rank " + std::to_string(kv_rank);
    return s;
  }
};

// The same options as comma-separated lists, for commands that run every
// combination side by side (bench, compare).
struct EngineFlagLists {
  std::vector<std::string> weights = {"stored"};
  int64_t q4_group = 32;
  std::vector<std::string> kv_cache = {"f32"};
  std::vector<int> kv_budget = {0};
  std::vector<int> kv_rank = {0};

  // Weights slowest, rank fastest.
  std::vector<EngineFlags> combinations() const {
    std::vector<EngineFlags> all;
    for (const auto& w : weights)
      for (const auto& kv : kv_cache)
        for (int budget : kv_budget)
          for (int rank : kv_rank) all.push_back({w, q4_group, kv, budget, rank});
    return all;
  }
};

inline constexpr const char* kWeightsHelp =
    "Decode weights: stored (exact), bf16 (F32 matrices rounded), q8 or q4 (quantised at load)";
inline constexpr const char* kKvCacheHelp = "KV cache storage: f32 (exact), bf16, fp8 or int8";
inline constexpr const char* kKvBudgetHelp =
    "Keep this many shape positions per layer (H2O eviction; condition tokens and BOS always stay; 0: all)";
inline constexpr const char* kKvRankHelp =
    "Low-rank keys and values of this rank, from MODEL/kv_bases.safetensors (calibrate-kv; 0: off)";

inline CLI::Validator kv_budget_check() { return whole_number_in(0, kMaxKvSize, "shape positions kept; 0 keeps all"); }
inline CLI::Validator kv_rank_check() { return whole_number_in(0, kMaxKvSize, "0 keeps full keys and values"); }

// `research`: the KV cache's forms, budget and rank, and the Q4 group, in the
// research group (research_group(), commands.h); the weights stay in view.
inline void add_engine_flags(CLI::App* cmd, EngineFlags& flags, bool research = false) {
  cmd->add_option("--weights", flags.weights, kWeightsHelp)->check(CLI::IsMember({"stored", "bf16", "q8", "q4"}));
  in_research_group(cmd->add_option("--kv-cache", flags.kv_cache, kKvCacheHelp), research)
      ->check(CLI::IsMember({"f32", "bf16", "fp8", "int8"}));
  in_research_group(cmd->add_option("--q4-group", flags.q4_group, "Weights per Q4 scale and offset: 32 or 64"),
                    research)
      ->check(CLI::IsMember({32, 64}));
  in_research_group(cmd->add_option("--kv-budget", flags.kv_budget, kKvBudgetHelp), research)->check(kv_budget_check());
  in_research_group(cmd->add_option("--kv-rank", flags.kv_rank, kKvRankHelp), research)->check(kv_rank_check());
}

inline void add_engine_flag_lists(CLI::App* cmd, EngineFlagLists& flags) {
  const std::string list = " (a comma-separated list: every combination runs)";
  cmd->add_option("--weights", flags.weights, kWeightsHelp + list)
      ->delimiter(',')
      ->check(CLI::IsMember({"stored", "bf16", "q8", "q4"}));
  cmd->add_option("--kv-cache", flags.kv_cache, kKvCacheHelp + list)
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "bf16", "fp8", "int8"}));
  cmd->add_option("--q4-group", flags.q4_group, "Weights per Q4 scale and offset: 32 or 64")
      ->check(CLI::IsMember({32, 64}));
  cmd->add_option("--kv-budget", flags.kv_budget, kKvBudgetHelp + list)->delimiter(',')->check(kv_budget_check());
  cmd->add_option("--kv-rank", flags.kv_rank, kKvRankHelp + list)->delimiter(',')->check(kv_rank_check());
}

inline Result<WeightOptions> weight_options(const std::string& name, int64_t q4_group) {
  auto format = weight_format_from_name(name);
  if (!format)
    return make_error(ErrorCode::kInvalidArgument, "--weights " + name + " is not one of stored, bf16, q8, q4");
  return WeightOptions{*format, q4_group};
}

// The KV options the flags name (no bases: planning reads them).
inline Result<KvCacheOptions> kv_cache_choice(const EngineFlags& flags) {
  auto format = kv_format_from_name(flags.kv_cache);
  if (!format)
    return option_error(ErrorCode::kInvalidArgument, OptionKey::kKvFormat,
                        "'" + flags.kv_cache + "' is not one of f32, bf16, fp8, int8");
  KvCacheOptions kv;
  kv.format = *format;
  kv.budget = flags.kv_budget;
  kv.rank = flags.kv_rank;
  CUBEFORGE_TRY(check_kv_cache_options(kv));
  return kv;
}

// The KV options for a model folder, with the bases read from it when a rank
// is given: for the measuring commands, which run sessions without planning.
inline Result<KvCacheOptions> kv_cache_options(const std::string& format_name, int budget, int rank,
                                               const std::filesystem::path& model_folder, const GptConfig& config) {
  auto format = kv_format_from_name(format_name);
  if (!format)
    return make_error(ErrorCode::kInvalidArgument, "--kv-cache " + format_name + " is not one of f32, bf16, fp8, int8");
  KvCacheOptions kv;
  kv.format = *format;
  kv.budget = budget;
  kv.rank = rank;
  if (rank > 0) {
    const auto path = model_folder / kKvBasesFile;
    if (model_folder.empty() || !std::filesystem::exists(path))
      return make_error(ErrorCode::kNotFound,
                        "--kv-rank needs '" + path.string() +
                            "'; write it with `cubeforge-lab calibrate-kv --model DIR --prompts FILE`");
    CUBEFORGE_ASSIGN_OR_RETURN(kv.low_rank, LowRankKv::load(path, config, rank));
  }
  CUBEFORGE_TRY(check_kv_cache_options(kv));
  return kv;
}

}  // namespace cubeforge::cli
