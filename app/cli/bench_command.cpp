// `cubeforge-cli bench`: prefill time, time per output token, tokens/s and
// achieved weight bandwidth against this machine's measured memory bandwidth.
// Given lists of weight formats and KV cache options, it times every
// combination side by side, alternating step by step. Every variant is fed
// the first variant's greedy tokens (teacher forcing), so they do the same
// work and their logits can be compared step by step with the first's.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "app/cli/commands.h"
#include "app/cli/engine_options.h"
#include "inference/core/system_info.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/ops.h"
#include "inference/model/gpt.h"
#include "inference/model/random_weights.h"
#include "inference/sampling/sampler.h"

namespace cubeforge::cli {

namespace {

struct BenchOptions {
  std::string model_dir;
  std::string shape;
  std::string dtype = "bf16";
  int steps = 32;
  int threads = 0;
  int cond_tokens = 77;
  bool guidance = true;
  bool json = false;
  uint64_t seed = 0;
  std::string save_random;  // write the random GPT here (benchmarks of file-backed loading)
  EngineFlagLists engine;   // every combination runs
};

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * double(values.size() - 1);
  const size_t lo = size_t(position);
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (position - double(lo));
}

// The GPT file, shared by every weight format the run compares.
struct LoadedFile {
  std::shared_ptr<const SafetensorsFile> file;
  GptConfig config;
  std::string description;
};

Result<LoadedFile> load_file(const BenchOptions& o) {
  LoadedFile loaded;
  if (!o.model_dir.empty()) {
    const std::filesystem::path dir = o.model_dir;
    CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dir / "shape_gpt.safetensors",
                                                                           SafetensorsFile::Residence::kHugePages));
    if (std::filesystem::exists(dir / "config.yaml")) {
      CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig yaml, parse_model_config_yaml(dir / "config.yaml"));
      CUBEFORGE_TRY(check_gpt_config(yaml.gpt, file, "the model configuration"));
      loaded.config = yaml.gpt;
    } else {
      CUBEFORGE_ASSIGN_OR_RETURN(loaded.config, infer_gpt_config(file));
    }
    loaded.description = dir.string();
    loaded.file = std::make_shared<const SafetensorsFile>(std::move(file));
    return loaded;
  }
  CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig config, preset_model_config(o.shape));
  DType dtype = o.dtype == "f32" ? DType::kF32 : o.dtype == "f16" ? DType::kF16 : DType::kBF16;
  loaded.description = "random " + o.shape + " (" + std::string(dtype_name(dtype)) + ")";
  loaded.config = config.gpt;
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, random_weights_file(expected_gpt_tensors(config.gpt), o.seed, dtype,
                                                                       "random-" + o.shape + "-gpt"));
  if (!o.save_random.empty()) {
    std::vector<TensorToWrite> tensors;
    for (const auto& e : file.entries()) {
      CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, file.get(e.name));
      tensors.push_back({e.name, e.dtype, e.shape, std::span<const std::byte>(view.data, view.byte_size())});
    }
    std::filesystem::create_directories(o.save_random);
    CUBEFORGE_TRY(write_safetensors(std::filesystem::path(o.save_random) / "shape_gpt.safetensors", tensors));
  }
  loaded.file = std::make_shared<const SafetensorsFile>(std::move(file));
  return loaded;
}

// One configuration the run times: a weight format and KV cache options,
// with its own session, decoding its own greedy tokens.
struct Variant {
  EngineFlags flags;
  const DualStreamGpt* model = nullptr;
  KvCacheOptions kv;
  std::optional<GptSession> session;
  std::vector<float> logits, embedding;
  double prefill_ms = 0;
  std::vector<double> step_ms, step_total_gbps;
  double kv_bytes_last = 0;
  double logit_error_sq = 0, first_logit_sq = 0;  // Σ‖logits − first's‖², Σ‖first's‖²
};

nlohmann::json variant_report(const Variant& v, const MemoryBandwidth& bandwidth) {
  const double median = percentile(v.step_ms, 0.5);
  const double weight_bytes = double(v.model->decode_weight_bytes());
  const double weight_gbps = weight_bytes / (median * 1e-3) / 1e9;
  const double total_gbps = percentile(v.step_total_gbps, 0.5);
  return {
      {"weights", v.flags.weights},
      {"kv_cache", v.flags.kv_cache},
      {"kv_budget", v.flags.kv_budget},
      {"kv_rank", v.flags.kv_rank},
      {"prefill_ms", v.prefill_ms},
      {"tpot_ms_median", median},
      {"tpot_ms_p90", percentile(v.step_ms, 0.9)},
      {"tokens_per_s", 1000.0 / median},
      {"decode_weight_bytes", weight_bytes},
      {"weight_gbps", weight_gbps},
      {"total_gbps", total_gbps},
      {"total_bandwidth_fraction", bandwidth.read_gbps > 0 ? total_gbps / bandwidth.read_gbps : 0.0},
      {"kv_cache_read_mb_last_step", v.kv_bytes_last / 1e6},
      {"bandwidth_fraction", bandwidth.read_gbps > 0 ? weight_gbps / bandwidth.read_gbps : 0.0},
      {"floor_ms", weight_bytes / (bandwidth.read_gbps * 1e9) * 1e3},
      {"logit_relative_error_to_first", v.first_logit_sq > 0 ? std::sqrt(v.logit_error_sq / v.first_logit_sq) : 0.0},
  };
}

int run_bench(const BenchOptions& o) {
  if (o.model_dir.empty() == o.shape.empty()) {
    std::fprintf(stderr, "bench: give either --model DIR or --shape small|v01|v05\n");
    return 2;
  }
  const std::vector<EngineFlags> combinations = o.engine.combinations();
  if (combinations.empty()) {
    std::fprintf(stderr, "bench: --weights, --kv-cache, --kv-budget and --kv-rank need at least one value\n");
    return 2;
  }
  // The floor first, in a child process, on fresh memory.
  const MemoryBandwidth bandwidth = measure_memory_bandwidth_isolated();
  cpu::set_thread_count(o.threads);
  const auto load_start = std::chrono::steady_clock::now();
  auto fail = [](const Error& e) {
    std::fprintf(stderr, "bench: %s\n", e.to_string().c_str());
    return 1;
  };
  auto loaded = load_file(o);
  if (!loaded.ok()) return fail(loaded.error());
  // One model per weight format, all over the one file.
  std::map<std::string, DualStreamGpt> models;
  for (const std::string& name : o.engine.weights) {
    if (models.count(name)) continue;
    auto options = weight_options(name, o.engine.q4_group);
    if (!options.ok()) return fail(options.error());
    auto model = DualStreamGpt::from_shared_file(loaded->file, loaded->config, *options);
    if (!model.ok()) return fail(model.error());
    models.emplace(name, std::move(*model));
  }
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const DualStreamGpt& first = models.at(combinations.front().weights);
  const GptConfig& c = first.config();
  const int batch = o.guidance ? 2 : 1;
  const int cond_length = first.condition_length(o.cond_tokens);
  const size_t d = size_t(c.width);

  // A condition of plausible scale: projected random text features.
  std::vector<float> text(size_t(o.cond_tokens) * size_t(c.text_width));
  Xoshiro256 rng(o.seed + 1);
  for (auto& v : text) v = float(rng.uniform() * 2.0 - 1.0);
  auto cond = first.project_condition(text, nullptr);
  if (!cond.ok()) return fail(cond.error());
  std::vector<float> cond_rows;
  for (int b = 0; b < batch; ++b) cond_rows.insert(cond_rows.end(), cond->begin(), cond->end());

  std::vector<Variant> variants;
  for (const EngineFlags& flags : combinations) {
    Variant v;
    v.flags = flags;
    v.model = &models.at(flags.weights);
    auto kv = kv_cache_options(flags.kv_cache, flags.kv_budget, flags.kv_rank, o.model_dir, c);
    if (!kv.ok()) return fail(kv.error());
    v.kv = *kv;
    v.session.emplace(*v.model, batch, cond_length, o.steps + 1, AttentionMode::kCausal, v.kv);
    v.logits.resize(size_t(batch) * c.vocab_size());
    v.embedding.resize(size_t(batch) * d);
    variants.push_back(std::move(v));
  }
  // Alternating: every step runs each variant once, so drifts of the shared
  // machine's speed reach them all alike.
  for (Variant& v : variants) {
    auto bos = v.model->token_embedding(c.bos_id());
    for (int b = 0; b < batch; ++b) std::copy(bos.begin(), bos.end(), v.embedding.begin() + ptrdiff_t(b * d));
    const auto start = std::chrono::steady_clock::now();
    Status prefill = v.session->prefill(cond_rows, v.embedding, 1, v.logits);
    v.prefill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!prefill.ok()) return fail(prefill.error());
  }
  for (int i = 0; i < o.steps; ++i) {
    const std::vector<float>& first_logits = variants.front().logits;
    const int token = int(std::max_element(first_logits.begin(), first_logits.begin() + c.codes) - first_logits.begin());
    for (Variant& v : variants) {
      auto row = v.model->token_embedding(token);
      for (int b = 0; b < batch; ++b) std::copy(row.begin(), row.end(), v.embedding.begin() + ptrdiff_t(b * d));
      const auto start = std::chrono::steady_clock::now();
      Status step = v.session->decode(v.embedding, v.logits);
      v.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!step.ok()) return fail(step.error());
      // Besides the weights, each step reads the cache rows it attends to
      // (the session counts them in their stored form).
      v.kv_bytes_last = v.session->kv_cache_bytes();
      v.step_total_gbps.push_back((double(v.model->decode_weight_bytes()) + v.kv_bytes_last) /
                                  (v.step_ms.back() * 1e-3) / 1e9);
      // Against the first variant's logits of this step (it ran first), every row's codes.
      for (int b = 0; b < batch; ++b)
        for (int t = 0; t < c.codes; ++t) {
          const size_t at = size_t(b) * c.vocab_size() + size_t(t);
          const double diff = double(v.logits[at]) - double(variants.front().logits[at]);
          v.logit_error_sq += diff * diff;
          v.first_logit_sq += double(variants.front().logits[at]) * variants.front().logits[at];
        }
    }
  }
  const double peak_rss_mb = peak_rss_mib();

  nlohmann::json common = {
      {"model", loaded->description},
      {"threads", cpu::thread_count()},
      {"kernel_isa", cpu::kernel_isa()},
      {"blas_core", cpu::blas_core_name()},
      {"batch", batch},
      {"cond_tokens", cond_length},
      {"steps", o.steps},
      {"load_ms", load_ms},
      {"memory_read_gbps", bandwidth.read_gbps},
      {"memory_copy_gbps", bandwidth.copy_gbps},
      {"peak_rss_mb", peak_rss_mb},
  };
  std::vector<nlohmann::json> reports;
  for (const Variant& v : variants) {
    nlohmann::json r = variant_report(v, bandwidth);
    // Against the first variant, step by step: the median of the paired ratios.
    std::vector<double> ratios;
    for (size_t i = 0; i < v.step_ms.size(); ++i) ratios.push_back(v.step_ms[i] / variants.front().step_ms[i]);
    r["tpot_ratio_to_first"] = percentile(ratios, 0.5);
    reports.push_back(r);
  }
  if (o.json) {
    nlohmann::json report = common;
    if (reports.size() == 1)
      report.update(reports.front());
    else
      report["variants"] = reports;
    std::cout << report.dump() << std::endl;
    return 0;
  }
  std::printf("model              %s\n", loaded->description.c_str());
  std::printf("threads / kernels  %d / %s (BLAS %s)\n", cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());
  std::printf("batch (CFG rows)   %d, cond tokens %d, decode steps %d\n", batch, cond_length, o.steps);
  std::printf("load               %.1f ms\n", load_ms);
  std::printf("memory read        %.2f GB/s measured (copy %.2f GB/s)\n", bandwidth.read_gbps, bandwidth.copy_gbps);
  for (const nlohmann::json& r : reports) {
    std::printf("\nweights %s, KV cache %s", r["weights"].get<std::string>().c_str(),
                r["kv_cache"].get<std::string>().c_str());
    if (r["kv_budget"].get<int>()) std::printf(", budget %d", r["kv_budget"].get<int>());
    if (r["kv_rank"].get<int>()) std::printf(", rank %d", r["kv_rank"].get<int>());
    std::printf("\n  prefill            %.1f ms\n", r["prefill_ms"].get<double>());
    std::printf("  TPOT median / p90  %.2f / %.2f ms  (%.1f tokens/s; %.3f x the first)\n",
                r["tpot_ms_median"].get<double>(), r["tpot_ms_p90"].get<double>(), r["tokens_per_s"].get<double>(),
                r["tpot_ratio_to_first"].get<double>());
    std::printf("  weights per token  %.1f MB (floor %.2f ms/token)\n", r["decode_weight_bytes"].get<double>() / 1e6,
                r["floor_ms"].get<double>());
    std::printf("  weight bandwidth   %.2f GB/s (%.0f%% of the floor)\n", r["weight_gbps"].get<double>(),
                100.0 * r["bandwidth_fraction"].get<double>());
    std::printf("  with the KV cache  %.2f GB/s median (%.0f%% of the floor); %.0f MB of cache read at the last step\n",
                r["total_gbps"].get<double>(), 100.0 * r["total_bandwidth_fraction"].get<double>(),
                r["kv_cache_read_mb_last_step"].get<double>());
    std::printf("  logits vs first    %.3g relative error (fed the first's tokens)\n",
                r["logit_relative_error_to_first"].get<double>());
  }
  std::printf("\npeak RSS           %.0f MB\n", peak_rss_mb);
  return 0;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and per-token decode speed");
  cmd->add_option("--model", options->model_dir, "Model folder (shape_gpt.safetensors, optional config.yaml)");
  cmd->add_option("--shape", options->shape, "Random-weight model instead: small, v01 or v05")
      ->check(CLI::IsMember({"small", "v01", "v05"}));
  cmd->add_option("--dtype", options->dtype, "Random weights precision")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--steps", options->steps, "Decode steps to time")->check(CLI::Range(1, 100000));
  cmd->add_option("--threads", options->threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--seed", options->seed, "Seed for random weights and inputs");
  cmd->add_flag("!--no-guidance", options->guidance, "Batch 1 instead of the CFG batch of 2");
  cmd->add_flag("--json", options->json, "Print one JSON object");
  cmd->add_option("--save-random", options->save_random,
                  "Also write the random GPT to DIR/shape_gpt.safetensors (to benchmark --model on it)");
  add_engine_flag_lists(cmd, options->engine);
  return [cmd, options]() -> int { return cmd->parsed() ? run_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
