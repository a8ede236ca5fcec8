// `cubeforge-lab bench`: prefill time, time per output token, tokens/s and
// achieved weight bandwidth against this machine's measured memory bandwidth.
//
// Given weight formats or KV cache options (lists: every combination runs),
// it compares them on the CPU backend side by side, step by step in turn, so
// that drifts of a shared machine's speed reach them all alike. Every variant
// is fed the first variant's greedy tokens (teacher forcing): they do the same
// work, and their logits are compared with the first's at every step.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/cli/engine_options.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "inference/backend/generate.h"
#include "inference/planning/select_backend.h"
#include "inference/core/system_info.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/kv_cache.h"
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
  std::string backend = "auto";
  std::vector<std::string> modes;  // no-cache, cache, graph; empty: the backend's default
  EngineFlagLists engine;  // CPU: weight formats and KV cache options; every combination runs
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

Result<LoadedFile> load_file(const BenchOptions& o) {
  LoadedFile loaded;
  if (!o.model_dir.empty()) {
    const std::filesystem::path dir = o.model_dir;
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

int run_variants(const BenchOptions& o, const LoadedFile& loaded, const BandwidthFigures& bandwidth) {
  auto fail = [](const Error& e) {
    print_error("bench", e);
    return 1;
  };
  const std::vector<EngineFlags> combinations = o.engine.combinations();
  // One model per weight format, all over the one file.
  const auto load_start = std::chrono::steady_clock::now();
  std::map<std::string, DualStreamGpt> models;
  for (const std::string& name : o.engine.weights) {
    if (models.count(name)) continue;
    auto options = weight_options(name, o.engine.q4_group);
    if (!options.ok()) return fail(options.error());
    auto model = DualStreamGpt::from_shared_file(loaded.file, loaded.config, *options);
    if (!model.ok()) return fail(model.error());
    models.emplace(name, std::move(*model));
  }
  const double convert_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const DualStreamGpt& first = models.at(combinations.front().weights);
  const GptConfig& c = first.config();
  const int batch = o.guidance ? 2 : 1;
  const int cond_length = first.condition_length(o.cond_tokens);
  const size_t d = size_t(c.width);
  auto cond_rows = random_condition_rows(first, o, batch);
  if (!cond_rows.ok()) return fail(cond_rows.error());

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
  for (Variant& v : variants) {
    auto bos = v.model->token_embedding(c.bos_id());
    for (int b = 0; b < batch; ++b) std::copy(bos.begin(), bos.end(), v.embedding.begin() + ptrdiff_t(b * d));
    const auto start = std::chrono::steady_clock::now();
    Status prefill = v.session->prefill(*cond_rows, v.embedding, 1, v.logits);
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

  std::vector<nlohmann::json> reports;
  for (const Variant& v : variants) {
    nlohmann::json r = variant_report(v, bandwidth.read_gbps);
    // Against the first variant, step by step: the median of the paired ratios.
    std::vector<double> ratios;
    for (size_t i = 0; i < v.step_ms.size(); ++i) ratios.push_back(v.step_ms[i] / variants.front().step_ms[i]);
    r["tpot_ratio_to_first"] = percentile(ratios, 0.5);
    reports.push_back(r);
  }
  if (o.json) {
    nlohmann::json report = {
        {"model", loaded.description},
        {"backend", backend_kind_name(BackendKind::kCpu)},
        {"threads", cpu::thread_count()},
        {"kernel_isa", cpu::kernel_isa()},
        {"blas_core", cpu::blas_core_name()},
        {"batch", batch},
        {"cond_tokens", cond_length},
        {"steps", o.steps},
        {"mode", "cache"},
        {"convert_ms", convert_ms},
        {"memory_read_gbps", bandwidth.read_gbps},
        {"memory_copy_gbps", bandwidth.copy_gbps},
        {"peak_rss_mb", peak_rss_mb},
    };
    if (reports.size() == 1)
      report.update(reports.front());
    else
      report["variants"] = reports;
    std::cout << json_line(report) << std::endl;
    return 0;
  }
  std::printf("model              %s\n", loaded.description.c_str());
  std::printf("threads / kernels  %d / %s (BLAS %s)\n", cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());
  std::printf("batch (CFG rows)   %d, cond tokens %d, decode steps %d\n", batch, cond_length, o.steps);
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

// ---- One model on a backend, mode by mode.

int run_bench(const BenchOptions& o) {
  if (o.model_dir.empty() == o.shape.empty()) {
    std::fprintf(stderr, "bench: give either --model DIR or --shape small|v01|v05\n");
    return 2;
  }
  BackendChoice choice = *parse_backend_choice(o.backend);
  const std::vector<EngineFlags> combinations = o.engine.combinations();
  const EngineFlags& single = combinations.front();
  // On CUDA one combination at a time, at full rank (this path reads no KV
  // bases, so a rank is compared on the CPU); the backend's supports() says
  // whether it runs the rest once it is open.
  const bool cuda_weights = choice == BackendChoice::kCuda && combinations.size() == 1 && single.kv_rank == 0;
  const bool compare_options = (combinations.size() != 1 || !single.exact()) && !cuda_weights;
  if (compare_options) {
    if (choice == BackendChoice::kCuda) {
      std::fprintf(stderr,
                   "bench: on --backend cuda give one --weights format, one --kv-cache of f32, bf16, fp8 or int8 "
                   "and at most one --kv-budget, without --kv-rank; lists of options and ranks are compared on the "
                   "CPU backend\n");
      return 2;
    }
    if (!o.modes.empty() && o.modes != std::vector<std::string>{"cache"}) {
      std::fprintf(stderr, "bench: weight formats and KV cache options are compared with the KV cache (mode 'cache')\n");
      return 2;
    }
    choice = BackendChoice::kCpu;
  }
  // The CPU's floor comes first, in a child process on fresh memory: a fork
  // is only safe before any thread (the CPU pool, the CUDA runtime's) exists.
  std::optional<BandwidthFigures> host_bandwidth;
  if (choice != BackendChoice::kCuda) {
    const MemoryBandwidth measured = measure_memory_bandwidth_isolated();
    host_bandwidth = BandwidthFigures{measured.read_gbps, measured.copy_gbps};
  }
  cpu::set_thread_count(o.threads);
  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = load_file(o);
  if (!loaded.ok()) {
    print_error("bench", loaded.error());
    return 1;
  }
  if (compare_options) return run_variants(o, *loaded, *host_bandwidth);
  auto weights = weight_options(single.weights, single.q4_group);
  if (!weights.ok()) {
    print_error("bench", weights.error());
    return 2;
  }
  auto model = DualStreamGpt::from_shared_file(loaded->file, loaded->config, *weights);
  if (!model.ok()) {
    print_error("bench", model.error());
    return 1;
  }
  const std::string& description = loaded->description;
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  auto selection = select_token_backend(choice, *model);
  if (!selection.ok()) {
    std::fprintf(stderr, "bench: %s\n", selection.error().to_string().c_str());
    return 1;
  }
  const TokenBackend& backend = *selection->backend;
  const bool on_cuda = backend.kind() == BackendKind::kCuda;
  if (!o.json) std::fprintf(stderr, "backend: %s\n", selection->reason.c_str());
  std::optional<BandwidthFigures> bandwidth = on_cuda ? std::nullopt : host_bandwidth;
  if (!bandwidth) {
    auto measured = backend.measure_bandwidth();
    if (!measured.ok()) {
      std::fprintf(stderr, "bench: %s\n", measured.error().to_string().c_str());
      return 1;
    }
    bandwidth = *measured;
  }
  std::vector<std::string> modes = o.modes;
  if (modes.empty()) modes = on_cuda ? std::vector<std::string>{"no-cache", "cache", "graph"} : std::vector<std::string>{"cache"};

  const GptConfig& c = model->config();
  const int batch = o.guidance ? 2 : 1;
  const int cond_length = model->condition_length(o.cond_tokens);
  // One form on this path: f32, bf16, fp8 or int8.
  const KvFormat kv_format = kv_format_from_name(single.kv_cache).value_or(KvFormat::kF32);

  auto cond_rows = random_condition_rows(*model, o, batch);
  if (!cond_rows.ok()) {
    print_error("bench", cond_rows.error());
    return 1;
  }

  // Bytes each step reads besides the weights: the keys and values of every
  // cached position it attends to (cond + shape in dual blocks, shape only in
  // single blocks), for each CFG row.
  double slot_bytes = 2.0 * double(c.width) * sizeof(float);
  if (kv_format != KvFormat::kF32)
    slot_bytes = cpu::kv_bytes_per_slot(kv_format, c.heads, c.head_dim());  // codes and their scales
  auto kv_bytes_at = [&](int position) {
    const double per_slot = slot_bytes * batch;
    const int shape = single.kv_budget > 0 ? std::min(position + 1, single.kv_budget) : position + 1;
    return per_slot * (double(c.dual_layers) * (cond_length + shape) + double(c.single_layers) * shape);
  };
  const double weight_bytes = on_cuda ? backend.weight_bytes() : double(model->decode_weight_bytes());

  using Clock = std::chrono::steady_clock;
  auto run_mode = [&](const std::string& mode) -> Result<ModeFigures> {
    TokenSessionOptions options;
    options.tokens = o.steps + 1;  // the prefill's token, then `steps` decode steps
    options.cond_length = cond_length;
    options.guidance_scale = o.guidance ? 3.0f : 0.0f;
    options.use_kv_cache = mode != "no-cache";
    options.cuda_graphs = mode == "graph";
    if (options.use_kv_cache) {  // without a cache there is nothing to store or evict
      options.kv_cache.format = kv_format;
      options.kv_cache.budget = single.kv_budget;
    }
    CUBEFORGE_ASSIGN_OR_RETURN(std::unique_ptr<TokenSession> session, backend.open_session(options));
    ModeFigures figures;
    figures.mode = mode;
    std::vector<int> tokens;
    auto start = Clock::now();
    CUBEFORGE_TRY(session->prefill(*cond_rows));
    CUBEFORGE_TRY(session->wait_for_token());
    CUBEFORGE_TRY(session->read_tokens(tokens));
    figures.prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
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
        step_total_gbps.push_back((weight_bytes + kv_bytes_at(int(i))) / (ms * 1e-3) / 1e9);
      }
      CUBEFORGE_TRY(keep_ahead());
    }
    figures.median = percentile(step_ms, 0.5);
    figures.p90 = percentile(step_ms, 0.9);
    figures.total_gbps = percentile(step_total_gbps, 0.5);
    figures.stats = session->stats();
    return figures;
  };

  std::vector<ModeFigures> results;
  for (const std::string& mode : modes) {
    if (mode == "graph" && !on_cuda) {
      if (!o.json) std::fprintf(stderr, "bench: mode 'graph' needs the CUDA backend; skipped\n");
      continue;
    }
    auto figures = run_mode(mode);
    if (!figures.ok()) {
      std::fprintf(stderr, "bench: %s: %s\n", mode.c_str(), figures.error().to_string().c_str());
      return 1;
    }
    results.push_back(*figures);
  }
  if (results.empty()) {
    std::fprintf(stderr, "bench: no mode to run\n");
    return 2;
  }
  const double read_gbps = bandwidth->read_gbps;
  auto mode_json = [&](const ModeFigures& f) {
    const double gbps = weight_bytes / (f.median * 1e-3) / 1e9;
    return nlohmann::json{{"mode", f.mode},
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
  };
  // The top-level figures are the last mode's (the fastest of the default list).
  const ModeFigures& primary = results.back();
  const double peak_rss_mb = peak_rss_mib();
  const double weight_gbps = weight_bytes / (primary.median * 1e-3) / 1e9;
  const double fraction = read_gbps > 0 ? weight_gbps / read_gbps : 0.0;
  const double total_fraction = read_gbps > 0 ? primary.total_gbps / read_gbps : 0.0;
  const double kv_mb_last = kv_bytes_at(o.steps) / 1e6;
  const double floor_ms = read_gbps > 0 ? weight_bytes / (read_gbps * 1e9) * 1e3 : 0.0;

  nlohmann::json report = {
      {"model", description},
      {"weights", single.weights},
      {"backend", backend_kind_name(backend.kind())},
      {"backend_description", backend.description()},
      {"backend_reason", selection->reason},
      {"threads", cpu::thread_count()},
      {"kernel_isa", cpu::kernel_isa()},
      {"blas_core", cpu::blas_core_name()},
      {"batch", batch},
      {"cond_tokens", cond_length},
      {"steps", o.steps},
      {"kv_cache", single.kv_cache},
      {"kv_budget", single.kv_budget},
      {"load_ms", load_ms},
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
      {"memory_copy_gbps", bandwidth->copy_gbps},
      {"bandwidth_fraction", fraction},
      {"floor_ms", floor_ms},
      {"peak_rss_mb", peak_rss_mb},
      {"modes", nlohmann::json::array()},
  };
  for (const ModeFigures& f : results) report["modes"].push_back(mode_json(f));
  if (o.json) {
    std::cout << report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return 0;
  }
  std::printf("model              %s (weights %s)\n", description.c_str(), single.weights.c_str());
  std::printf("backend            %s (%s)\n", backend.description().c_str(), selection->reason.c_str());
  std::printf("threads / kernels  %d / %s (BLAS %s)\n", cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());
  std::printf("batch (CFG rows)   %d, cond tokens %d, decode steps %d\n", batch, cond_length, o.steps);
  std::printf("load               %.1f ms\n", load_ms);
  for (const ModeFigures& f : results) {
    const double gbps = weight_bytes / (f.median * 1e-3) / 1e9;
    std::printf("%-9s prefill %.1f ms, TPOT median / p90 %.3f / %.3f ms (%.1f tokens/s), %.0f GB/s = %.0f%% of "
                "the floor",
                f.mode.c_str(), f.prefill_ms, f.median, f.p90, 1000.0 / f.median, gbps,
                read_gbps > 0 ? 100.0 * gbps / read_gbps : 0.0);
    if (on_cuda)
      std::printf(", %d launches/step%s, %.0f MB on the device", f.stats.kernel_launches_per_step,
                  f.stats.graph_replay ? " (one graph)" : "", f.stats.device_memory_bytes / 1e6);
    std::printf("\n");
  }
  std::printf("weights per token  %.1f MB\n", weight_bytes / 1e6);
  std::printf("weight bandwidth   %.2f GB/s of %.2f GB/s measured read (%.0f%% of the floor; copy %.2f GB/s)\n",
              weight_gbps, read_gbps, 100.0 * fraction, bandwidth->copy_gbps);
  std::printf("with the KV cache   %.2f GB/s median (%.0f%% of the floor); %.0f MB of cache read at the last step\n",
              primary.total_gbps, 100.0 * total_fraction, kv_mb_last);
  std::printf("floor              %.2f ms/token\n", floor_ms);
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
