// `cubeforge-cli bench`: prefill time, time per output token, tokens/s and
// achieved weight bandwidth against this machine's measured memory bandwidth.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "app/cli/commands.h"
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
};

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * double(values.size() - 1);
  const size_t lo = size_t(position);
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (position - double(lo));
}

Result<DualStreamGpt> load_model(const BenchOptions& o, std::string* description) {
  if (!o.model_dir.empty()) {
    const std::filesystem::path dir = o.model_dir;
    std::optional<ModelConfig> yaml;
    if (std::filesystem::exists(dir / "config.yaml")) {
      CUBEFORGE_ASSIGN_OR_RETURN(yaml, parse_model_config_yaml(dir / "config.yaml"));
    }
    *description = dir.string();
    return DualStreamGpt::load(dir / "shape_gpt.safetensors", yaml ? &yaml->gpt : nullptr);
  }
  CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig config, preset_model_config(o.shape));
  DType dtype = o.dtype == "f32" ? DType::kF32 : o.dtype == "f16" ? DType::kF16 : DType::kBF16;
  *description = "random " + o.shape + " (" + std::string(dtype_name(dtype)) + ")";
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
  return DualStreamGpt::from_file(std::move(file), config.gpt);
}

int run_bench(const BenchOptions& o) {
  if (o.model_dir.empty() == o.shape.empty()) {
    std::fprintf(stderr, "bench: give either --model DIR or --shape small|v01|v05\n");
    return 2;
  }
  // The floor first, in a child process, on fresh memory.
  const MemoryBandwidth bandwidth = measure_memory_bandwidth_isolated();
  cpu::set_thread_count(o.threads);
  std::string description;
  const auto load_start = std::chrono::steady_clock::now();
  auto model = load_model(o, &description);
  if (!model.ok()) {
    std::fprintf(stderr, "bench: %s\n", model.error().to_string().c_str());
    return 1;
  }
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const GptConfig& c = model->config();
  const int batch = o.guidance ? 2 : 1;
  const int cond_length = model->condition_length(o.cond_tokens);
  const size_t d = size_t(c.width);

  // A condition of plausible scale: projected random text features.
  std::vector<float> text(size_t(o.cond_tokens) * size_t(c.text_width));
  Xoshiro256 rng(o.seed + 1);
  for (auto& v : text) v = float(rng.uniform() * 2.0 - 1.0);
  auto cond = model->project_condition(text, nullptr);
  if (!cond.ok()) {
    std::fprintf(stderr, "bench: %s\n", cond.error().to_string().c_str());
    return 1;
  }
  std::vector<float> cond_rows;
  for (int b = 0; b < batch; ++b) cond_rows.insert(cond_rows.end(), cond->begin(), cond->end());

  GptSession session(*model, batch, cond_length, o.steps + 1, AttentionMode::kCausal);
  std::vector<float> logits(size_t(batch) * c.vocab_size());
  std::vector<float> embedding(size_t(batch) * d);
  auto bos = model->token_embedding(c.bos_id());
  for (int b = 0; b < batch; ++b) std::copy(bos.begin(), bos.end(), embedding.begin() + ptrdiff_t(b * d));
  auto start = std::chrono::steady_clock::now();
  Status prefill = session.prefill(cond_rows, embedding, 1, logits);
  const double prefill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!prefill.ok()) {
    std::fprintf(stderr, "bench: %s\n", prefill.error().to_string().c_str());
    return 1;
  }
  std::vector<double> step_ms;
  // Bytes each step reads besides the weights: the float32 keys and values
  // of every cached position it attends to (cond + shape in dual blocks,
  // shape only in single blocks), for each CFG row.
  std::vector<double> step_total_gbps;
  auto kv_bytes_at = [&](int position) {
    const double per_slot = 2.0 * double(c.width) * sizeof(float) * batch;
    return per_slot * (double(c.dual_layers) * (cond_length + position + 1) + double(c.single_layers) * (position + 1));
  };
  for (int i = 0; i < o.steps; ++i) {
    const int token = int(std::max_element(logits.begin(), logits.begin() + c.codes) - logits.begin());
    auto row = model->token_embedding(token);
    for (int b = 0; b < batch; ++b) std::copy(row.begin(), row.end(), embedding.begin() + ptrdiff_t(b * d));
    start = std::chrono::steady_clock::now();
    Status step = session.decode(embedding, logits);
    step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    step_total_gbps.push_back((double(model->decode_weight_bytes()) + kv_bytes_at(i + 1)) / (step_ms.back() * 1e-3) / 1e9);
    if (!step.ok()) {
      std::fprintf(stderr, "bench: %s\n", step.error().to_string().c_str());
      return 1;
    }
  }
  const double peak_rss_mb = peak_rss_mib();
  const double median = percentile(step_ms, 0.5);
  const double p90 = percentile(step_ms, 0.9);
  const double weight_bytes = double(model->decode_weight_bytes());
  const double weight_gbps = weight_bytes / (median * 1e-3) / 1e9;
  const double fraction = bandwidth.read_gbps > 0 ? weight_gbps / bandwidth.read_gbps : 0.0;
  const double total_gbps = percentile(step_total_gbps, 0.5);
  const double total_fraction = bandwidth.read_gbps > 0 ? total_gbps / bandwidth.read_gbps : 0.0;
  const double kv_mb_last = kv_bytes_at(o.steps) / 1e6;

  nlohmann::json report = {
      {"model", description},
      {"threads", cpu::thread_count()},
      {"kernel_isa", cpu::kernel_isa()},
      {"blas_core", cpu::blas_core_name()},
      {"batch", batch},
      {"cond_tokens", cond_length},
      {"steps", o.steps},
      {"load_ms", load_ms},
      {"prefill_ms", prefill_ms},
      {"tpot_ms_median", median},
      {"tpot_ms_p90", p90},
      {"tokens_per_s", 1000.0 / median},
      {"decode_weight_bytes", weight_bytes},
      {"weight_gbps", weight_gbps},
      {"total_gbps", total_gbps},
      {"total_bandwidth_fraction", total_fraction},
      {"kv_cache_read_mb_last_step", kv_mb_last},
      {"memory_read_gbps", bandwidth.read_gbps},
      {"memory_copy_gbps", bandwidth.copy_gbps},
      {"bandwidth_fraction", fraction},
      {"floor_ms", weight_bytes / (bandwidth.read_gbps * 1e9) * 1e3},
      {"peak_rss_mb", peak_rss_mb},
  };
  if (o.json) {
    std::cout << report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return 0;
  }
  std::printf("model              %s\n", description.c_str());
  std::printf("threads / kernels  %d / %s (BLAS %s)\n", cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());
  std::printf("batch (CFG rows)   %d, cond tokens %d, decode steps %d\n", batch, cond_length, o.steps);
  std::printf("load               %.1f ms\n", load_ms);
  std::printf("prefill            %.1f ms\n", prefill_ms);
  std::printf("TPOT median / p90  %.2f / %.2f ms  (%.1f tokens/s)\n", median, p90, 1000.0 / median);
  std::printf("weights per token  %.1f MB\n", weight_bytes / 1e6);
  std::printf("weight bandwidth   %.2f GB/s of %.2f GB/s measured read (%.0f%% of the floor; copy %.2f GB/s)\n",
              weight_gbps, bandwidth.read_gbps, 100.0 * fraction, bandwidth.copy_gbps);
  std::printf("with the KV cache   %.2f GB/s median (%.0f%% of the floor); %.0f MB of cache read at the last step\n",
              total_gbps, 100.0 * total_fraction, kv_mb_last);
  std::printf("floor              %.2f ms/token\n", weight_bytes / (bandwidth.read_gbps * 1e9) * 1e3);
  std::printf("peak RSS           %.0f MB\n", peak_rss_mb);
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
  return [cmd, options]() -> int { return cmd->parsed() ? run_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
