// `cubeforge-lab bench`: prefill time, time per output token, tokens/s and
// achieved weight bandwidth against this machine's measured memory bandwidth.
//
// Given weight formats or KV cache options (lists: every combination runs),
// it compares them on the CPU backend side by side, step by step in turn, so
// that drifts of a shared machine's speed reach them all alike. Every variant
// is fed the first variant's greedy tokens (teacher forcing): they do the same
// work, and their logits are compared with the first's at every step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/cli/engine_options.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/backend/generate.h"
#include "inference/core/system_info.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/kv_cache.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/gpt_session.h"
#include "inference/model/random_weights.h"
#include "inference/planning/select_backend.h"
#include "inference/sampling/sampler.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kBenchCommand = "bench";

struct BenchOptions {
  LabOptions lab;
  std::string shape;  // random weights of a preset's sizes instead of a model folder
  std::string dtype = "bf16";
  int steps = 32;
  int cond_tokens = 77;
  bool guidance = true;
  uint64_t seed = 0;
  std::string save_random;  // write the random GPT here (benchmarks of file-backed loading)
  std::string backend = "auto";
  std::vector<std::string> modes;  // no-cache, cache, graph; empty: the backend's default
  EngineFlagLists engine;          // CPU: weight formats and KV cache options; every combination runs
};

// One mode of the ablation, timed over a whole session.
struct ModeFigures {
  std::string mode;
  double prefill_ms = 0, median = 0, p90 = 0, total_gbps = 0;
  TokenSessionStats stats;
};

// The GPT file, shared by every weight format a run compares.
struct LoadedFile {
  std::shared_ptr<const SafetensorsFile> file;
  GptConfig config;
  std::string description;
};

Result<LoadedFile> load_file(const BenchOptions& o, const std::filesystem::path& dir) {
  LoadedFile loaded;
  if (o.shape.empty()) {
    // Every decode step streams the shape-stream weights: keep them in huge pages.
    CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dir / "shape_gpt.safetensors",
                                                                           SafetensorsFile::Residence::kHugePages));
    if (std::filesystem::exists(dir / "config.yaml")) {
      CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig yaml, parse_model_config_yaml(dir / "config.yaml"));
      CUBEFORGE_TRY(check_gpt_config(yaml.gpt, file, "the model configuration"));
      loaded.config = yaml.gpt;
    } else {
      CUBEFORGE_ASSIGN_OR_RETURN(loaded.config, infer_gpt_config(file));
    }
    loaded.description = readable_untrusted(dir.string());
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

// A condition of plausible scale for every batch row: projected random text features.
Result<std::vector<float>> random_condition_rows(const DualStreamGpt& model, const BenchOptions& o, int batch) {
  std::vector<float> text(size_t(o.cond_tokens) * size_t(model.config().text_width));
  Xoshiro256 rng(o.seed + 1);
  for (auto& v : text) v = float(rng.uniform() * 2.0 - 1.0);
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond, model.project_condition(text, nullptr));
  std::vector<float> rows;
  for (int b = 0; b < batch; ++b) rows.insert(rows.end(), cond.begin(), cond.end());
  return rows;
}

// ---- Weight formats and KV cache options side by side (CPU).

// One configuration the run times: a weight format and KV cache options,
// with its own session.
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

nlohmann::json variant_report(const Variant& v, double read_gbps) {
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
      {"bandwidth_fraction", read_gbps > 0 ? weight_gbps / read_gbps : 0.0},
      {"total_gbps", total_gbps},
      {"total_bandwidth_fraction", read_gbps > 0 ? total_gbps / read_gbps : 0.0},
      {"kv_cache_read_mb_last_step", v.kv_bytes_last / 1e6},
      {"floor_ms", read_gbps > 0 ? weight_bytes / (read_gbps * 1e9) * 1e3 : 0.0},
      {"logit_relative_error_to_first", v.first_logit_sq > 0 ? std::sqrt(v.logit_error_sq / v.first_logit_sq) : 0.0},
  };
}

// The variants side by side: one model per weight format, all over the one
// file, and a session per combination, prefilled.
struct VariantRun {
  std::map<std::string, DualStreamGpt> models;
  std::vector<Variant> variants;
  double convert_ms = 0;
  int batch = 0, cond_length = 0;
};

Status open_variants(const BenchOptions& o, const LoadedFile& loaded, const std::filesystem::path& folder,
                     VariantRun& run) {
  const std::vector<EngineFlags> combinations = o.engine.combinations();
  const auto load_start = std::chrono::steady_clock::now();
  for (const std::string& name : o.engine.weights) {
    if (run.models.count(name)) continue;
    CUBEFORGE_ASSIGN_OR_RETURN(WeightOptions options, weight_options(name, o.engine.q4_group));
    CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt model,
                               DualStreamGpt::from_shared_file(loaded.file, loaded.config, options));
    run.models.emplace(name, std::move(model));
  }
  run.convert_ms = ms_since(load_start);
  const DualStreamGpt& first = run.models.at(combinations.front().weights);
  const GptConfig& c = first.config();
  run.batch = o.guidance ? 2 : 1;
  run.cond_length = first.condition_length(o.cond_tokens);
  const size_t d = size_t(c.width);
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond_rows, random_condition_rows(first, o, run.batch));
  for (const EngineFlags& flags : combinations) {
    Variant v;
    v.flags = flags;
    v.model = &run.models.at(flags.weights);
    CUBEFORGE_ASSIGN_OR_RETURN(v.kv, kv_cache_options(flags.kv_cache, flags.kv_budget, flags.kv_rank, folder, c));
    v.session.emplace(*v.model, run.batch, run.cond_length, o.steps + 1, AttentionMode::kCausal, v.kv);
    v.logits.resize(size_t(run.batch) * c.vocab_size());
    v.embedding.resize(size_t(run.batch) * d);
    run.variants.push_back(std::move(v));
  }
  for (Variant& v : run.variants) {
    auto bos = v.model->token_embedding(c.bos_id());
    for (int b = 0; b < run.batch; ++b) std::copy(bos.begin(), bos.end(), v.embedding.begin() + ptrdiff_t(b * d));
    const auto start = std::chrono::steady_clock::now();
    CUBEFORGE_TRY(v.session->prefill(cond_rows, v.embedding, 1, v.logits));
    v.prefill_ms = ms_since(start);
  }
  return ok_status();
}

// Step by step, every variant in turn, fed the first variant's greedy token.
Status step_variants(int steps, int batch, std::vector<Variant>& variants) {
  const GptConfig& c = variants.front().model->config();
  const size_t d = size_t(c.width);
  for (int i = 0; i < steps; ++i) {
    const std::vector<float>& first_logits = variants.front().logits;
    const int token =
        int(std::max_element(first_logits.begin(), first_logits.begin() + c.codes) - first_logits.begin());
    for (Variant& v : variants) {
      auto row = v.model->token_embedding(token);
      for (int b = 0; b < batch; ++b) std::copy(row.begin(), row.end(), v.embedding.begin() + ptrdiff_t(b * d));
      const auto start = std::chrono::steady_clock::now();
      CUBEFORGE_TRY(v.session->decode(v.embedding, v.logits));
      v.step_ms.push_back(ms_since(start));
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
  return ok_status();
}

void report_variants(const BenchOptions& o, const LoadedFile& loaded, const BandwidthFigures& bandwidth,
                     const VariantRun& run) {
  const double peak_rss_mb = peak_rss_mib();
  std::vector<nlohmann::json> reports;
  for (const Variant& v : run.variants) {
    nlohmann::json r = variant_report(v, bandwidth.read_gbps);
    // Against the first variant, step by step: the median of the paired ratios.
    std::vector<double> ratios;
    for (size_t i = 0; i < v.step_ms.size(); ++i) ratios.push_back(v.step_ms[i] / run.variants.front().step_ms[i]);
    r["tpot_ratio_to_first"] = percentile(ratios, 0.5);
    reports.push_back(r);
  }
  if (o.lab.json) {
    nlohmann::json results = {
        {"model", loaded.description},
        {"backend", backend_kind_name(BackendKind::kCpu)},
        {"batch", run.batch},
        {"cond_tokens", run.cond_length},
        {"steps", o.steps},
        {"mode", "cache"},
        {"convert_ms", run.convert_ms},
        {"memory_read_gbps", bandwidth.read_gbps},
        {"memory_copy_gbps", bandwidth.copy_gbps},
        {"peak_rss_mb", peak_rss_mb},
    };
    if (reports.size() == 1)
      results.update(reports.front());
    else
      results["variants"] = reports;
    print_lab_report(kBenchCommand, results);
    return;
  }
  std::printf("model              %s\n", loaded.description.c_str());
  std::printf("threads / kernels  %d / %s (BLAS %s)\n", cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());
  std::printf("batch (CFG rows)   %d, cond tokens %d, decode steps %d\n", run.batch, run.cond_length, o.steps);
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
}

int run_variants(const BenchOptions& o, const LoadedFile& loaded, const std::filesystem::path& folder,
                 const BandwidthFigures& bandwidth) {
  VariantRun run;
  Status status = open_variants(o, loaded, folder, run);
  if (status.ok()) status = step_variants(o.steps, run.batch, run.variants);
  if (!status.ok()) {
    print_error(kBenchCommand, status.error());
    return exit_status_of(status.error());
  }
  report_variants(o, loaded, bandwidth, run);
  return 0;
}

// ---- One model on a backend, mode by mode.

// What the run does: on which backend, and whether it compares options side by side.
struct BenchPlan {
  BackendChoice choice = BackendChoice::kAuto;
  EngineFlags single;            // the one combination of a run on a backend
  bool compare_options = false;  // weight formats and KV options side by side, on the CPU
  std::filesystem::path folder;  // empty with --shape
};

// Exit status 0 with the plan filled, else the status to exit with (after saying why).
int plan_bench(const BenchOptions& o, BenchPlan& plan) {
  if (o.shape.empty()) {
    const auto folder = lab_model_folder(o.lab, kBenchCommand);
    if (!folder) return 2;
    plan.folder = *folder;
  }
  const auto choice = parse_backend_choice(o.backend);  // checked by the parser
  plan.choice = choice.ok() ? *choice : BackendChoice::kAuto;
  const std::vector<EngineFlags> combinations = o.engine.combinations();
  plan.single = combinations.front();
  // On CUDA one combination at a time, at full rank (this path reads no KV
  // bases, so a rank is compared on the CPU); the backend's supports() says
  // whether it runs the rest once it is open.
  const bool cuda_weights = plan.choice == BackendChoice::kCuda && combinations.size() == 1 && plan.single.kv_rank == 0;
  plan.compare_options = (combinations.size() != 1 || !plan.single.exact()) && !cuda_weights;
  if (!plan.compare_options) return 0;
  if (plan.choice == BackendChoice::kCuda) {
    std::fprintf(stderr,
                 "%s: on --backend cuda give one --weights format, one --kv-cache of f32, bf16, fp8 or int8 "
                 "and at most one --kv-budget, without --kv-rank; lists of options and ranks are compared on the "
                 "CPU backend\n",
                 kBenchCommand);
    return 2;
  }
  if (!o.modes.empty() && o.modes != std::vector<std::string>{"cache"}) {
    std::fprintf(stderr, "%s: weight formats and KV cache options are compared with the KV cache (mode 'cache')\n",
                 kBenchCommand);
    return 2;
  }
  plan.choice = BackendChoice::kCpu;
  return 0;
}

// The model on its backend, with what the figures are measured against.
struct BenchBackend {
  std::unique_ptr<DualStreamGpt> model;  // where the backend finds it, wherever this moves
  BackendSelection selection;
  BandwidthFigures bandwidth;
  double load_ms = 0;
  double weight_bytes = 0;
  bool on_cuda() const { return selection.backend->kind() == BackendKind::kCuda; }
};

Result<BenchBackend> open_bench_backend(const BenchOptions& o, const BenchPlan& plan, const LoadedFile& loaded,
                                        std::chrono::steady_clock::time_point load_start,
                                        const std::optional<BandwidthFigures>& host_bandwidth) {
  BenchBackend opened;
  CUBEFORGE_ASSIGN_OR_RETURN(WeightOptions weights, weight_options(plan.single.weights, plan.single.q4_group));
  CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt model, DualStreamGpt::from_shared_file(loaded.file, loaded.config, weights));
  opened.model = std::make_unique<DualStreamGpt>(std::move(model));
  opened.load_ms = ms_since(load_start);
  CUBEFORGE_ASSIGN_OR_RETURN(opened.selection, select_token_backend(plan.choice, *opened.model));
  if (!o.lab.json) std::fprintf(stderr, "backend: %s\n", opened.selection.reason.c_str());
  if (opened.on_cuda() || !host_bandwidth) {
    CUBEFORGE_ASSIGN_OR_RETURN(opened.bandwidth, opened.selection.backend->measure_bandwidth());
  } else {
    opened.bandwidth = *host_bandwidth;
  }
  opened.weight_bytes =
      opened.on_cuda() ? opened.selection.backend->weight_bytes() : double(opened.model->decode_weight_bytes());
  return opened;
}

// Bytes each step reads besides the weights: the keys and values of every
// cached position it attends to (cond + shape in dual blocks, shape only in
// single blocks), for each CFG row.
struct KvTraffic {
  double slot_bytes = 0;
  int batch = 0, cond_length = 0, budget = 0;
  const GptConfig* config = nullptr;
  double at(int position) const {
    const int shape = budget > 0 ? std::min(position + 1, budget) : position + 1;
    return slot_bytes * batch *
           (double(config->dual_layers) * (cond_length + shape) + double(config->single_layers) * shape);
  }
};

// One mode of the ablation, timed over a whole session.
Result<ModeFigures> run_mode(const std::string& mode, const BenchOptions& o, const BenchBackend& opened,
                             const KvTraffic& kv, KvFormat kv_format, std::span<const float> cond_rows) {
  using Clock = std::chrono::steady_clock;
  TokenSessionOptions options;
  options.tokens = o.steps + 1;  // the prefill's token, then `steps` decode steps
  options.cond_length = kv.cond_length;
  options.guidance_scale = o.guidance ? 3.0f : 0.0f;
  options.use_kv_cache = mode != "no-cache";
  options.cuda_graphs = mode == "graph";
  if (options.use_kv_cache) {  // without a cache there is nothing to store or evict
    options.kv_cache.format = kv_format;
    options.kv_cache.budget = kv.budget;
  }
  CUBEFORGE_ASSIGN_OR_RETURN(std::unique_ptr<TokenSession> session, opened.selection.backend->open_session(options));
  ModeFigures figures;
  figures.mode = mode;
  std::vector<int> tokens;
  auto start = Clock::now();
  CUBEFORGE_TRY(session->prefill(cond_rows));
  CUBEFORGE_TRY(session->wait_for_token());
  CUBEFORGE_TRY(session->read_tokens(tokens));
  figures.prefill_ms = ms_since(start);
  int enqueued = 1;
  auto keep_ahead = [&]() -> Status {
    const int wanted = std::min(options.tokens, int(tokens.size()) + kStepsInFlight);
    if (wanted > enqueued) CUBEFORGE_TRY(session->enqueue_steps(wanted - enqueued));
    enqueued = std::max(enqueued, wanted);
    return ok_status();
  };
  std::vector<double> step_ms, step_total_gbps;
  start = Clock::now();
  CUBEFORGE_TRY(keep_ahead());
  while (int(tokens.size()) < options.tokens) {
    CUBEFORGE_TRY(session->wait_for_token());
    const size_t before = tokens.size();
    CUBEFORGE_TRY(session->read_tokens(tokens));
    const auto now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - start).count() / double(tokens.size() - before);
    start = now;
    for (size_t i = before; i < tokens.size(); ++i) {
      step_ms.push_back(ms);
      step_total_gbps.push_back((opened.weight_bytes + kv.at(int(i))) / (ms * 1e-3) / 1e9);
    }
    CUBEFORGE_TRY(keep_ahead());
  }
  figures.median = percentile(step_ms, 0.5);
  figures.p90 = percentile(step_ms, 0.9);
  figures.total_gbps = percentile(step_total_gbps, 0.5);
  figures.stats = session->stats();
  return figures;
}

nlohmann::json mode_json(const ModeFigures& f, double weight_bytes, double read_gbps) {
  const double gbps = weight_bytes / (f.median * 1e-3) / 1e9;
  return {{"mode", f.mode},
          {"prefill_ms", f.prefill_ms},
          {"tpot_ms_median", f.median},
          {"tpot_ms_p90", f.p90},
          {"tokens_per_s", 1000.0 / f.median},
          {"weight_gbps", gbps},
          {"bandwidth_fraction", read_gbps > 0 ? gbps / read_gbps : 0.0},
          {"total_gbps", f.total_gbps},
          {"total_bandwidth_fraction", read_gbps > 0 ? f.total_gbps / read_gbps : 0.0},
          {"kernel_launches_per_step", f.stats.kernel_launches_per_step},
          {"graph_replay", f.stats.graph_replay},
          {"device_memory_mb", f.stats.device_memory_bytes / 1e6}};
}

// The top-level figures are the last mode's (the fastest of the default list).
void report_modes(const BenchOptions& o, const BenchPlan& plan, const LoadedFile& loaded, const BenchBackend& opened,
                  const KvTraffic& kv, const std::vector<ModeFigures>& results) {
  const TokenBackend& backend = *opened.selection.backend;
  const double read_gbps = opened.bandwidth.read_gbps, weight_bytes = opened.weight_bytes;
  const ModeFigures& primary = results.back();
  const double peak_rss_mb = peak_rss_mib();
  const double weight_gbps = weight_bytes / (primary.median * 1e-3) / 1e9;
  const double fraction = read_gbps > 0 ? weight_gbps / read_gbps : 0.0;
  const double total_fraction = read_gbps > 0 ? primary.total_gbps / read_gbps : 0.0;
  const double kv_mb_last = kv.at(o.steps) / 1e6;
  const double floor_ms = read_gbps > 0 ? weight_bytes / (read_gbps * 1e9) * 1e3 : 0.0;
  if (o.lab.json) {
    nlohmann::json results_json = {
        {"model", loaded.description},
        {"weights", plan.single.weights},
        {"backend", backend_kind_name(backend.kind())},
        {"backend_description", backend.description()},
        {"backend_reason", opened.selection.reason},
        {"batch", kv.batch},
        {"cond_tokens", kv.cond_length},
        {"steps", o.steps},
        {"kv_cache", plan.single.kv_cache},
        {"kv_budget", plan.single.kv_budget},
        {"load_ms", opened.load_ms},
        {"mode", primary.mode},
        {"prefill_ms", primary.prefill_ms},
        {"tpot_ms_median", primary.median},
        {"tpot_ms_p90", primary.p90},
        {"tokens_per_s", 1000.0 / primary.median},
        {"decode_weight_bytes", weight_bytes},
        {"weight_gbps", weight_gbps},
        {"total_gbps", primary.total_gbps},
        {"total_bandwidth_fraction", total_fraction},
        {"kv_cache_read_mb_last_step", kv_mb_last},
        {"memory_read_gbps", read_gbps},
        {"memory_copy_gbps", opened.bandwidth.copy_gbps},
        {"bandwidth_fraction", fraction},
        {"floor_ms", floor_ms},
        {"peak_rss_mb", peak_rss_mb},
        {"modes", nlohmann::json::array()},
    };
    for (const ModeFigures& f : results) results_json["modes"].push_back(mode_json(f, weight_bytes, read_gbps));
    print_lab_report(kBenchCommand, results_json);
    return;
  }
  std::printf("model              %s (weights %s)\n", loaded.description.c_str(), plan.single.weights.c_str());
  std::printf("backend            %s (%s)\n", backend.description().c_str(), opened.selection.reason.c_str());
  std::printf("threads / kernels  %d / %s (BLAS %s)\n", cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());
  std::printf("batch (CFG rows)   %d, cond tokens %d, decode steps %d\n", kv.batch, kv.cond_length, o.steps);
  std::printf("load               %.1f ms\n", opened.load_ms);
  for (const ModeFigures& f : results) {
    const double gbps = weight_bytes / (f.median * 1e-3) / 1e9;
    std::printf(
        "%-9s prefill %.1f ms, TPOT median / p90 %.3f / %.3f ms (%.1f tokens/s), %.0f GB/s = %.0f%% of "
        "the floor",
        f.mode.c_str(), f.prefill_ms, f.median, f.p90, 1000.0 / f.median, gbps,
        read_gbps > 0 ? 100.0 * gbps / read_gbps : 0.0);
    if (opened.on_cuda())
      std::printf(", %d launches/step%s, %.0f MB on the device", f.stats.kernel_launches_per_step,
                  f.stats.graph_replay ? " (one graph)" : "", f.stats.device_memory_bytes / 1e6);
    std::printf("\n");
  }
  std::printf("weights per token  %.1f MB\n", weight_bytes / 1e6);
  std::printf("weight bandwidth   %.2f GB/s of %.2f GB/s measured read (%.0f%% of the floor; copy %.2f GB/s)\n",
              weight_gbps, read_gbps, 100.0 * fraction, opened.bandwidth.copy_gbps);
  std::printf("with the KV cache   %.2f GB/s median (%.0f%% of the floor); %.0f MB of cache read at the last step\n",
              primary.total_gbps, 100.0 * total_fraction, kv_mb_last);
  std::printf("floor              %.2f ms/token\n", floor_ms);
  std::printf("peak RSS           %.0f MB\n", peak_rss_mb);
}

// Every mode --modes asks for that the backend runs (graph needs CUDA).
Result<std::vector<ModeFigures>> run_modes(const BenchOptions& o, const BenchBackend& opened, const KvTraffic& kv,
                                           KvFormat kv_format, std::span<const float> cond_rows) {
  std::vector<std::string> modes = o.modes;
  if (modes.empty())
    modes =
        opened.on_cuda() ? std::vector<std::string>{"no-cache", "cache", "graph"} : std::vector<std::string>{"cache"};
  std::vector<ModeFigures> results;
  for (const std::string& mode : modes) {
    if (mode == "graph" && !opened.on_cuda()) {
      if (!o.lab.json) std::fprintf(stderr, "%s: mode 'graph' needs the CUDA backend; skipped\n", kBenchCommand);
      continue;
    }
    auto figures = run_mode(mode, o, opened, kv, kv_format, cond_rows);
    if (!figures.ok()) return make_error(figures.error().code, mode + ": " + figures.error().message);
    results.push_back(*figures);
  }
  if (results.empty()) return make_error(ErrorCode::kInvalidArgument, "no mode to run");
  return results;
}

int run_bench(const BenchOptions& o) {
  BenchPlan plan;
  if (int status = plan_bench(o, plan); status != 0) return status;
  // The CPU's floor comes first, in a child process on fresh memory: a fork
  // is only safe before any thread (the CPU pool, the CUDA runtime's) exists.
  std::optional<BandwidthFigures> host_bandwidth;
  if (plan.choice != BackendChoice::kCuda) {
    const MemoryBandwidth measured = measure_memory_bandwidth_isolated();
    host_bandwidth = BandwidthFigures{measured.read_gbps, measured.copy_gbps};
  }
  apply_lab_threads(o.lab);
  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = load_file(o, plan.folder);
  if (!loaded.ok()) {
    print_error(kBenchCommand, loaded.error());
    return 1;
  }
  if (plan.compare_options) return run_variants(o, *loaded, plan.folder, *host_bandwidth);
  auto opened = open_bench_backend(o, plan, *loaded, load_start, host_bandwidth);
  if (!opened.ok()) {
    print_error(kBenchCommand, opened.error());
    return 1;
  }
  const GptConfig& c = opened->model->config();
  // One form on this path: f32, bf16, fp8 or int8.
  const KvFormat kv_format = kv_format_from_name(plan.single.kv_cache).value_or(KvFormat::kF32);
  KvTraffic kv;
  kv.batch = o.guidance ? 2 : 1;
  kv.cond_length = opened->model->condition_length(o.cond_tokens);
  kv.budget = plan.single.kv_budget;
  kv.config = &c;
  kv.slot_bytes = kv_format == KvFormat::kF32 ? 2.0 * double(c.width) * sizeof(float)
                                              : cpu::kv_bytes_per_slot(kv_format, c.heads, c.head_dim());
  auto cond_rows = random_condition_rows(*opened->model, o, kv.batch);
  auto results = cond_rows.ok() ? run_modes(o, *opened, kv, kv_format, *cond_rows)
                                : Result<std::vector<ModeFigures>>(cond_rows.error());
  if (!results.ok()) {
    print_error(kBenchCommand, results.error());
    return results.error().code == ErrorCode::kInvalidArgument ? 2 : 1;  // no mode to run is a usage error
  }
  report_modes(o, plan, *loaded, *opened, kv, *results);
  return 0;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(kBenchCommand, "Measure prefill and per-token decode speed");
  CLI::Option* model = add_lab_options(cmd, options->lab, kModelOption | kThreadsOption | kJsonOption);
  add_shape_option(cmd, options->shape, model, "Random-weight model instead: small, v01 or v05");
  cmd->add_option("--dtype", options->dtype, "Random weights precision")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--steps", options->steps, "Decode steps to time")->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", options->seed, "Seed for random weights and inputs");
  cmd->add_flag("!--no-guidance", options->guidance, "Batch 1 instead of the CFG batch of 2");
  cmd->add_option("--backend", options->backend, "Where the GPT runs: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--modes", options->modes,
                  "Modes of the ablation to time, in order: no-cache, cache, graph (default: all three on CUDA, "
                  "cache on the CPU)")
      ->delimiter(',')
      ->check(CLI::IsMember({"no-cache", "cache", "graph"}));
  cmd->add_option("--save-random", options->save_random,
                  "Also write the random GPT to DIR/shape_gpt.safetensors (to benchmark --model on it)");
  add_engine_flag_lists(cmd, options->engine);
  return [cmd, options]() -> int { return cmd->parsed() ? run_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
