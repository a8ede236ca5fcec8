// The engine's weight and KV cache options on the command line, shared by
// generate, bench and compare: --weights stored|bf16|q8|q4 (--q4-group),
// --kv-cache f32|bf16|fp8|int8, --kv-budget N, --kv-rank R. Each defaults to
// the exact setting.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

#include "inference/core/result.h"
#include "inference/model/gpt.h"

namespace cubeforge::cli {

struct EngineFlags {
  std::string weights = "stored";
  int64_t q4_group = 32;
  std::string kv_cache = "f32";
  int kv_budget = 0;
  int kv_rank = 0;
};

// `lists`: the options take comma-separated lists (bench runs every combination).
inline void add_engine_flags(CLI::App* cmd, EngineFlags& flags, bool lists = false) {
  auto weights = cmd->add_option("--weights", flags.weights,
                                 "Decode weights: stored (exact), bf16 (F32 matrices rounded), q8 or q4 (quantised at load)");
  auto kv_cache = cmd->add_option("--kv-cache", flags.kv_cache, "KV cache storage: f32 (exact), bf16, fp8 or int8");
  if (!lists) {
    weights->check(CLI::IsMember({"stored", "bf16", "q8", "q4"}));
    kv_cache->check(CLI::IsMember({"f32", "bf16", "fp8", "int8"}));
  }
  cmd->add_option("--q4-group", flags.q4_group, "Weights per Q4 scale and offset: 32 or 64")
      ->check(CLI::IsMember({32, 64}));
  cmd->add_option("--kv-budget", flags.kv_budget,
                  "Keep this many shape positions per layer (H2O eviction; condition tokens and BOS always stay; 0: all)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-rank", flags.kv_rank,
                  "Low-rank keys and values of this rank, from MODEL/kv_bases.safetensors (calibrate-kv; 0: off)")
      ->check(CLI::Range(0, 1 << 20));
}

inline Result<WeightOptions> weight_options(const std::string& name, int64_t q4_group) {
  auto format = weight_format_from_name(name);
  if (!format)
    return make_error(ErrorCode::kInvalidArgument, "--weights " + name + " is not one of stored, bf16, q8, q4");
  return WeightOptions{*format, q4_group};
}

// The KV options for a model folder (the bases are read from it when a rank is given).
inline Result<KvCacheOptions> kv_cache_options(const std::string& format_name, int budget, int rank,
                                               const std::filesystem::path& model_folder, const GptConfig& config) {
  auto format = cpu::kv_format_from_name(format_name);
  if (!format)
    return make_error(ErrorCode::kInvalidArgument, "--kv-cache " + format_name + " is not one of f32, bf16, fp8, int8");
  KvCacheOptions kv;
  kv.format = *format;
  kv.budget = budget;
  if (rank > 0) {
    const auto path = model_folder / kKvBasesFile;
    if (model_folder.empty() || !std::filesystem::exists(path))
      return make_error(ErrorCode::kNotFound, "--kv-rank needs '" + path.string() +
                                                  "'; write it with `cubeforge-cli calibrate-kv --model DIR --prompts FILE`");
    CUBEFORGE_ASSIGN_OR_RETURN(kv.low_rank, LowRankKv::load(path, config, rank));
  }
  CUBEFORGE_TRY(check_kv_cache_options(kv));
  return kv;
}

}  // namespace cubeforge::cli
