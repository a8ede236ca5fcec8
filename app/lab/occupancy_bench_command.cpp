// `cubeforge-lab bench-occupancy`: occupancy queries per second and achieved
// arithmetic rate of the shape decoder, as meshing issues them (one slice per
// thread), for the fused decoder at points, the fused decoder at grid indices
// (its first layer from per-axis terms, as meshing runs it) and the
// layer-at-a-time path; on a model folder or on a random-weight shape
// tokenizer of the real sizes (`--shape v05`).
//
// With a latent top-k, the points come in the blocks coarse-to-fine forms at
// its last level (the 2×2×2 points of random cells of the level before), the
// cells' corners are evaluated first, untimed, and each block then attends to
// the k latents its cell's corners gave the most weight (latent_selection.h),
// in turn with full attention at the same points.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "app/cli/option_checks.h"
#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_models.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/core/system_info.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/ops.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/model/config.h"
#include "inference/model/latent_selection.h"
#include "inference/model/occupancy_slices.h"
#include "inference/model/random_weights.h"
#include "inference/model/shape_tokenizer.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kOccupancyCommand = "bench-occupancy";

struct OccupancyBenchOptions {
  LabOptions lab;
  std::string shape;  // a random-weight shape tokenizer of these sizes instead of a model
  int64_t latent_top_k = 0;
  double peak_gflops = 0;  // 0: the nominal peak from the reported clock
  int64_t points = 262144;
  int repeats = 5;
  std::string path = "all";
  uint64_t seed = 1;
};

struct PathFigures {
  std::string path;
  double median_ms = 0.0;
  double points_per_second = 0.0;
  double gflops = 0.0;
  // With a latent top-k: the same points attending to their blocks' latents.
  double top_k_median_ms = 0.0;
  double top_k_points_per_second = 0.0;
  double top_k_gflops = 0.0;
  int64_t sign_disagreements = 0;  // points whose inside/outside class top-k changes
  double largest_top_k_difference = 0.0;
};

// Two FMA units of the widest vectors per core at the reported clock: the
// nominal peak (some CPUs have one AVX-512 FMA unit per core).
double nominal_peak_gflops(int threads) {
  const std::optional<double> ghz = reported_cpu_ghz();
  if (!ghz) return 0.0;
  const std::string isa = cpu::kernel_isa();
  const double lanes = isa == "avx512" ? 16 : isa == "avx2" ? 8 : 4;
  return double(threads) * 2.0 * lanes * 2.0 * *ghz;
}

// `count` points of the grid in blocks of 2×2×2: the points a random cell of
// the level below `spec`'s owns at that level (its lowest corner among them),
// as coarse-to-fine's last level asks for them; the cells' corners into `corners`.
void block_points(const GridSpec& spec, int64_t count, std::mt19937_64& rng, std::vector<int32_t>& ijk,
                  std::vector<int32_t>& corners) {
  const int64_t parent_cells = spec.cells_per_axis() / 2;
  std::uniform_int_distribution<int32_t> cell(0, int32_t(parent_cells) - 1);
  std::vector<uint8_t> corner_taken(size_t((parent_cells + 1) * (parent_cells + 1) * (parent_cells + 1)), 0);
  ijk.clear();
  corners.clear();
  while (int64_t(ijk.size()) < count * 3) {
    const int32_t c[3] = {cell(rng), cell(rng), cell(rng)};
    for (int p = 0; p < 8 && int64_t(ijk.size()) < count * 3; ++p)
      ijk.insert(ijk.end(), {2 * c[0] + (p & 1), 2 * c[1] + ((p >> 1) & 1), 2 * c[2] + ((p >> 2) & 1)});
    for (int p = 0; p < 8; ++p) {
      const int32_t corner[3] = {c[0] + (p & 1), c[1] + ((p >> 1) & 1), c[2] + ((p >> 2) & 1)};
      uint8_t& taken =
          corner_taken[size_t((corner[0] * (parent_cells + 1) + corner[1]) * (parent_cells + 1) + corner[2])];
      if (taken) continue;
      taken = 1;
      corners.insert(corners.end(), {2 * corner[0], 2 * corner[1], 2 * corner[2]});
    }
  }
}

// What every path evaluates: the tokenizer, latents of random tokens, and
// random points of the reference's resolution-8 meshing grid, by index and by
// coordinates (in blocks with a latent top-k, with their cells' corners).
struct OccupancyPlan {
  std::optional<ShapeTokenizer> tokenizer;
  std::string model_name;
  std::optional<PreparedLatents> prepared;
  GridSpec spec;
  std::vector<float> axis, points;
  std::vector<int32_t> ijk, corners;
  std::vector<std::string> paths;
};

// The paths --path asks for that this tokenizer runs; an error when one asked for by name cannot.
Result<std::vector<std::string>> occupancy_paths(const OccupancyBenchOptions& o, const ShapeTokenizer& tokenizer) {
  std::vector<std::string> paths;
  for (const char* fused_path : {"fused", "grid"}) {
    if (o.path != "all" && o.path != fused_path) continue;
    if (o.latent_top_k > 0 && std::string(fused_path) == "fused") {
      if (o.path == fused_path)
        return option_error(ErrorCode::kInvalidArgument, OptionKey::kLatentTopK,
                            "it runs at grid indices; use --path grid, layered or all");
      continue;
    }
    if (tokenizer.fused_occupancy_available())
      paths.push_back(fused_path);
    else if (o.path == fused_path)
      return make_error(ErrorCode::kUnsupported, std::string("the fused occupancy decoder needs AVX-512 (this CPU: ") +
                                                     cpu::kernel_isa() +
                                                     ") and width, head size and hidden width in multiples of 16");
  }
  if (o.path == "all" || o.path == "layered") paths.push_back("layered");
  return paths;
}

Result<OccupancyPlan> plan_occupancy(const OccupancyBenchOptions& o, const std::filesystem::path& folder) {
  OccupancyPlan plan;
  if (!o.shape.empty()) {
    plan.model_name = random_shape_tokenizer_name(o.shape, o.seed);
    CUBEFORGE_ASSIGN_OR_RETURN(plan.tokenizer, random_shape_tokenizer(o.shape, o.seed));
  } else {
    plan.model_name = readable_untrusted(folder.string());
    CUBEFORGE_ASSIGN_OR_RETURN(plan.tokenizer, load_folder_shape_tokenizer(folder));
  }
  const ShapeModelConfig& config = plan.tokenizer->config();
  CUBEFORGE_TRY(check_latent_selection(o.latent_top_k, true, config.latents));
  CUBEFORGE_ASSIGN_OR_RETURN(plan.paths, occupancy_paths(o, *plan.tokenizer));
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> tokens(static_cast<size_t>(config.latents));
  for (int64_t& t : tokens) t = int64_t(rng() % uint64_t(config.codes));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> latents, plan.tokenizer->decode_tokens(tokens));
  CUBEFORGE_ASSIGN_OR_RETURN(plan.prepared, plan.tokenizer->prepare_latents(latents));
  plan.spec.resolution = 8;
  plan.axis = grid_axis_coordinates(plan.spec);
  plan.ijk.resize(size_t(o.points * 3));
  if (o.latent_top_k > 0) {
    block_points(plan.spec, o.points, rng, plan.ijk, plan.corners);
  } else {
    std::uniform_int_distribution<int32_t> axis_index(0, int32_t(plan.axis.size()) - 1);
    for (int32_t& index : plan.ijk) index = axis_index(rng);
  }
  plan.points.resize(size_t(o.points * 3));
  for (size_t i = 0; i < plan.ijk.size(); ++i) plan.points[i] = plan.axis[size_t(plan.ijk[i])];
  return plan;
}

// With a latent top-k: the cells' corners first, untimed, at the level below
// (the coarse level of the selection), then blocks at this one.
Result<std::optional<LatentSelectionField>> prepared_selection(const OccupancyPlan& plan,
                                                               const ShapeTokenizer::GridQueries& grid, int64_t top_k) {
  if (top_k == 0) return std::optional<LatentSelectionField>();
  CUBEFORGE_ASSIGN_OR_RETURN(LatentSelectionField selection,
                             LatentSelectionField::create(*plan.tokenizer, *plan.prepared, grid, plan.spec, top_k));
  selection.begin_level(plan.spec.resolution - 1);
  std::vector<float> corner_logits(plan.corners.size() / 3);
  CUBEFORGE_TRY(selection.evaluate(plan.corners, corner_logits));
  selection.begin_level(plan.spec.resolution);
  return std::optional<LatentSelectionField>(std::move(selection));
}

// One path's timings (and its logits, for the comparison between paths).
Result<PathFigures> measure_occupancy_path(OccupancyPlan& plan, const std::string& path, const OccupancyBenchOptions& o,
                                           std::vector<float>& logits) {
  ShapeTokenizer& tokenizer = *plan.tokenizer;
  tokenizer.set_fused_occupancy(path != "layered");
  const ShapeTokenizer::GridQueries grid = tokenizer.prepare_grid(plan.axis);
  CUBEFORGE_ASSIGN_OR_RETURN(std::optional<LatentSelectionField> selection,
                             prepared_selection(plan, grid, o.latent_top_k));
  logits.assign(static_cast<size_t>(o.points), 0.f);
  std::vector<float> top_k_logits(logits.size());
  std::vector<double> times, top_k_times;
  for (int r = 0; r <= o.repeats; ++r) {  // the first run warms caches and buffers
    auto start = std::chrono::steady_clock::now();
    CUBEFORGE_TRY(path == "grid" || selection
                      ? occupancy_on_grid_in_slices(tokenizer, *plan.prepared, grid, plan.ijk, logits)
                      : occupancy_in_slices(tokenizer, *plan.prepared, plan.points, logits));
    if (r > 0) times.push_back(ms_since(start));
    if (!selection) continue;
    start = std::chrono::steady_clock::now();
    CUBEFORGE_TRY(selection->evaluate(plan.ijk, top_k_logits));
    if (r > 0) top_k_times.push_back(ms_since(start));
  }
  const ShapeModelConfig& config = tokenizer.config();
  const bool by_index = path == "grid";
  PathFigures f;
  f.path = path;
  std::sort(times.begin(), times.end());
  f.median_ms = times[times.size() / 2];
  f.points_per_second = double(o.points) / (f.median_ms / 1e3);
  f.gflops = f.points_per_second * occupancy_flops_per_point(config, by_index, config.latents) / 1e9;
  if (selection) {
    std::sort(top_k_times.begin(), top_k_times.end());
    f.top_k_median_ms = top_k_times[top_k_times.size() / 2];
    f.top_k_points_per_second = double(o.points) / (f.top_k_median_ms / 1e3);
    f.top_k_gflops = f.top_k_points_per_second * occupancy_flops_per_point(config, by_index, o.latent_top_k) / 1e9;
    for (size_t i = 0; i < logits.size(); ++i) {
      f.sign_disagreements += (logits[i] > 0.f) != (top_k_logits[i] > 0.f);
      f.largest_top_k_difference = std::max(f.largest_top_k_difference, double(std::abs(logits[i] - top_k_logits[i])));
    }
  }
  return f;
}

void report_occupancy(const OccupancyBenchOptions& o, const OccupancyPlan& plan,
                      const std::vector<PathFigures>& figures, std::optional<double> largest_difference) {
  const ShapeModelConfig& config = plan.tokenizer->config();
  const double flops = occupancy_flops_per_point(config, false, config.latents);
  const double peak = o.peak_gflops > 0 ? o.peak_gflops : nominal_peak_gflops(cpu::thread_count());
  auto of_peak = [peak](double gflops) { return peak > 0 ? gflops / peak : 0.0; };
  if (o.lab.json) {
    nlohmann::json j = {{"model", plan.model_name}, {"width", config.width},    {"latents", config.latents},
                        {"points", o.points},       {"flops_per_point", flops}, {"peak_gflops", peak}};
    for (const PathFigures& f : figures) {
      j["paths"][f.path] = {{"median_ms", f.median_ms},
                            {"points_per_second", f.points_per_second},
                            {"gflops", f.gflops},
                            {"fraction_of_peak", of_peak(f.gflops)}};
      if (o.latent_top_k > 0)
        j["latent_top_k"][f.path] = {{"top_k", o.latent_top_k},
                                     {"median_ms", f.top_k_median_ms},
                                     {"points_per_second", f.top_k_points_per_second},
                                     {"gflops", f.top_k_gflops},
                                     {"fraction_of_peak", of_peak(f.top_k_gflops)},
                                     {"speed_up", f.median_ms / f.top_k_median_ms},
                                     {"sign_disagreements", f.sign_disagreements},
                                     {"largest_logit_difference", f.largest_top_k_difference}};
    }
    if (largest_difference) j["largest_logit_difference"] = *largest_difference;
    print_lab_report(kOccupancyCommand, j);
    return;
  }
  std::printf("model              %s (width %lld, %lld latents)\n", plan.model_name.c_str(),
              static_cast<long long>(config.width), static_cast<long long>(config.latents));
  std::printf("points             %lld%s, %d threads, %s kernels, %.0f FLOPs per point\n",
              static_cast<long long>(o.points), o.latent_top_k > 0 ? " in blocks of 8" : "", cpu::thread_count(),
              cpu::kernel_isa(), flops);
  if (peak > 0)
    std::printf("peak               %.0f GFLOP/s (%s)\n", peak,
                o.peak_gflops > 0 ? "given" : "nominal: 2 FMA units per core at the reported clock");
  for (const PathFigures& f : figures) {
    std::printf("%-8s           %.1f ms median: %.0f points/s, %.1f GFLOP/s (%.0f%% of peak)\n", f.path.c_str(),
                f.median_ms, f.points_per_second, f.gflops, 100.0 * of_peak(f.gflops));
    if (o.latent_top_k > 0)
      std::printf(
          "  top-k %-6lld     %.1f ms median: %.0f points/s (%.2fx), %.1f GFLOP/s; %lld of %lld points change "
          "sign, largest |logit difference| %.3g\n",
          static_cast<long long>(o.latent_top_k), f.top_k_median_ms, f.top_k_points_per_second,
          f.median_ms / f.top_k_median_ms, f.top_k_gflops, static_cast<long long>(f.sign_disagreements),
          static_cast<long long>(o.points), f.largest_top_k_difference);
  }
  if (largest_difference) std::printf("largest |logit difference| between the paths: %.3g\n", *largest_difference);
}

int run_occupancy_bench(const OccupancyBenchOptions& o) {
  apply_lab_threads(o.lab);
  std::filesystem::path folder;
  if (o.shape.empty()) {
    const auto resolved = lab_model_folder(o.lab, kOccupancyCommand);
    if (!resolved) return 2;
    folder = *resolved;
  }
  auto plan = plan_occupancy(o, folder);
  if (!plan.ok()) {
    print_error(kOccupancyCommand, plan.error());
    return exit_status_of(plan.error());
  }
  std::vector<PathFigures> figures;
  std::vector<std::vector<float>> outputs;
  for (const std::string& path : plan->paths) {
    outputs.emplace_back();
    auto measured = measure_occupancy_path(*plan, path, o, outputs.back());
    if (!measured.ok()) {
      print_error(kOccupancyCommand, measured.error());
      return 1;
    }
    figures.push_back(*measured);
  }
  // Every path against the first, at the same points.
  std::optional<double> largest_difference;
  if (outputs.size() > 1) largest_difference = 0.0;
  for (size_t p = 1; p < outputs.size(); ++p)
    for (size_t i = 0; i < outputs[0].size(); ++i)
      largest_difference = std::max(*largest_difference, double(std::abs(outputs[0][i] - outputs[p][i])));
  report_occupancy(o, *plan, figures, largest_difference);
  return 0;
}

}  // namespace

Action add_occupancy_bench_command(CLI::App& app) {
  auto options = std::make_shared<OccupancyBenchOptions>();
  CLI::App* cmd = app.add_subcommand(kOccupancyCommand, "Measure occupancy queries per second of the shape decoder");
  CLI::Option* model = add_lab_options(cmd, options->lab, kModelOption | kThreadsOption | kJsonOption);
  add_shape_option(cmd, options->shape, model,
                   "Random-weight shape tokenizer of these sizes instead: small, v01 or v05");
  cmd->add_option("--latent-top-k", options->latent_top_k,
                  "Also time blocks of points attending to their cell's K heaviest latents (0: full attention only)")
      ->check(whole_number_in(0, 65536, "latents per block; 0 is full attention"));
  cmd->add_option("--peak-gflops", options->peak_gflops,
                  "The CPU's peak for the fraction reported (default: 2 FMA units per core at the reported clock)")
      ->check(number_in(0, 1e9, true, "GFLOP/s of all threads"));
  cmd->add_option("--points", options->points, "Query points per run")->check(CLI::Range(int64_t(1), int64_t(1) << 26));
  cmd->add_option("--repeats", options->repeats, "Timed runs (the median is reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--path", options->path, "fused (at points), grid (fused, at grid indices), layered or all")
      ->check(CLI::IsMember({"fused", "grid", "layered", "all"}));
  cmd->add_option("--seed", options->seed, "Seed for the random tokens and points (and weights with --shape)")
      ->check(seed_number());
  return [cmd, options]() -> int { return cmd->parsed() ? run_occupancy_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
