// `cubeforge-cli bench-occupancy`: occupancy queries per second and achieved
// arithmetic rate of the shape decoder, as meshing issues them (one slice per
// thread), for the fused decoder at points, the fused decoder at grid indices
// (its first layer from per-axis terms, as meshing runs it) and the
// layer-at-a-time path.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>

#include "app/cli/commands.h"
#include "inference/cpu/ops.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/model/config.h"
#include "inference/model/shape_tokenizer.h"
#include "inference/pipeline/cube_model.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

struct OccupancyBenchOptions {
  std::string model_dir;
  int64_t points = 262144;
  int repeats = 5;
  int threads = 0;
  std::string path = "all";
  uint64_t seed = 1;
  bool json = false;
};

struct PathFigures {
  std::string path;
  double median_ms = 0.0;
  double points_per_second = 0.0;
  double gflops = 0.0;
};

// Multiply-adds per query point of the occupancy decoder (2 FLOPs each). By
// grid index the first layer (query_in) comes from per-axis terms: not counted.
double flops_per_point(const ShapeModelConfig& c, int64_t hidden, bool by_grid_index) {
  const double W = double(c.width), S = double(c.latents), E = double(c.fourier_dim());
  const double macs = (by_grid_index ? 0.0 : E * W) + W * W  // query_in, query_out
                      + W * W         // c_q
                      + 2.0 * S * W   // scores and weighted values over all heads
                      + W * W         // c_proj
                      + 2.0 * W * double(hidden)  // up, down
                      + W;            // head
  return 2.0 * macs;
}

int run_occupancy_bench(const OccupancyBenchOptions& o) {
  if (o.threads > 0) cpu::set_thread_count(o.threads);
  const std::filesystem::path dir = o.model_dir.empty() ? default_model_folder() : std::filesystem::path(o.model_dir);
  std::optional<ModelConfig> yaml;
  if (std::filesystem::exists(dir / "config.yaml")) {
    auto parsed = parse_model_config_yaml(dir / "config.yaml");
    if (!parsed.ok()) {
      std::cerr << "error: " << parsed.error().to_string() << "\n";
      return 1;
    }
    yaml = std::move(parsed).value();
  }
  auto tokenizer = ShapeTokenizer::load(dir / "shape_tokenizer.safetensors", yaml ? &yaml->shape : nullptr,
                                        yaml ? (dir / "config.yaml").string() : "");
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.error().to_string() << "\n";
    return 1;
  }
  const ShapeModelConfig& config = tokenizer->config();

  // Latents of random tokens.
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> tokens(static_cast<size_t>(config.latents));
  for (int64_t& t : tokens) t = int64_t(rng() % uint64_t(config.codes));
  auto latents = tokenizer->decode_tokens(tokens);
  auto prepared = latents.ok() ? tokenizer->prepare_latents(*latents) : Result<PreparedLatents>(latents.error());
  if (!prepared.ok()) {
    std::cerr << "error: " << prepared.error().to_string() << "\n";
    return 1;
  }
  // Random points of the reference's resolution-8 meshing grid, by index and
  // by coordinates.
  GridSpec spec;
  spec.resolution = 8;
  const std::vector<float> axis = grid_axis_coordinates(spec);
  std::uniform_int_distribution<int32_t> axis_index(0, int32_t(axis.size()) - 1);
  std::vector<int32_t> ijk(size_t(o.points * 3));
  std::vector<float> points(size_t(o.points * 3));
  for (size_t i = 0; i < ijk.size(); ++i) {
    ijk[i] = axis_index(rng);
    points[i] = axis[size_t(ijk[i])];
  }

  std::vector<std::string> paths;
  for (const char* fused_path : {"fused", "grid"}) {
    if (o.path != "all" && o.path != fused_path) continue;
    if (tokenizer->fused_occupancy_available())
      paths.push_back(fused_path);
    else if (o.path == fused_path) {
      std::cerr << "error: the fused occupancy decoder needs AVX-512 (this CPU: " << cpu::kernel_isa()
                << ") and width, head size and hidden width in multiples of 16\n";
      return 1;
    }
  }
  if (o.path == "all" || o.path == "layered") paths.push_back("layered");

  const int64_t hidden = 4 * config.width;
  const double flops = flops_per_point(config, hidden, false);
  std::vector<PathFigures> figures;
  std::vector<std::vector<float>> outputs;
  for (const std::string& path : paths) {
    tokenizer->set_fused_occupancy(path != "layered");
    const ShapeTokenizer::GridQueries grid = tokenizer->prepare_grid(axis);
    std::vector<float> logits(static_cast<size_t>(o.points));
    std::vector<double> times;
    for (int r = 0; r <= o.repeats; ++r) {  // the first run warms caches and buffers
      const auto start = std::chrono::steady_clock::now();
      Status status = path == "grid" ? occupancy_on_grid_in_slices(*tokenizer, *prepared, grid, ijk, logits)
                                     : occupancy_in_slices(*tokenizer, *prepared, points, logits);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!status.ok()) {
        std::cerr << "error: " << status.error().to_string() << "\n";
        return 1;
      }
      if (r > 0) times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    PathFigures f;
    f.path = path;
    f.median_ms = times[times.size() / 2];
    f.points_per_second = double(o.points) / (f.median_ms / 1e3);
    f.gflops = f.points_per_second * flops_per_point(config, hidden, path == "grid") / 1e9;
    figures.push_back(f);
    outputs.push_back(std::move(logits));
  }
  // Every path against the first, at the same points.
  double largest_difference = 0.0;
  for (size_t p = 1; p < outputs.size(); ++p)
    for (size_t i = 0; i < outputs[0].size(); ++i)
      largest_difference = std::max(largest_difference, double(std::abs(outputs[0][i] - outputs[p][i])));

  if (o.json) {
    nlohmann::json j;
    j["model"] = dir.string();
    j["width"] = config.width;
    j["latents"] = config.latents;
    j["points"] = o.points;
    j["threads"] = cpu::thread_count();
    j["isa"] = cpu::kernel_isa();
    j["flops_per_point"] = flops;
    for (const PathFigures& f : figures)
      j["paths"][f.path] = {{"median_ms", f.median_ms}, {"points_per_second", f.points_per_second}, {"gflops", f.gflops}};
    if (outputs.size() > 1) j["largest_logit_difference"] = largest_difference;
    std::cout << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("model              %s (width %lld, %lld latents)\n", dir.string().c_str(),
              static_cast<long long>(config.width), static_cast<long long>(config.latents));
  std::printf("points             %lld, %d threads, %s kernels, %.0f FLOPs per point\n",
              static_cast<long long>(o.points), cpu::thread_count(), cpu::kernel_isa(), flops);
  for (const PathFigures& f : figures)
    std::printf("%-8s           %.1f ms median: %.0f points/s, %.1f GFLOP/s\n", f.path.c_str(), f.median_ms,
                f.points_per_second, f.gflops);
  if (outputs.size() > 1) std::printf("largest |logit difference| between the paths: %.3g\n", largest_difference);
  return 0;
}

}  // namespace

Action add_occupancy_bench_command(CLI::App& app) {
  auto options = std::make_shared<OccupancyBenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench-occupancy", "Measure occupancy queries per second of the shape decoder");
  cmd->add_option("--model", options->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--points", options->points, "Query points per run")->check(CLI::Range(int64_t(1), int64_t(1) << 26));
  cmd->add_option("--repeats", options->repeats, "Timed runs (the median is reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", options->threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--path", options->path, "fused (at points), grid (fused, at grid indices), layered or all")
      ->check(CLI::IsMember({"fused", "grid", "layered", "all"}));
  cmd->add_option("--seed", options->seed, "Seed for the random tokens and points");
  cmd->add_flag("--json", options->json, "Print one JSON object");
  return [cmd, options]() -> int { return cmd->parsed() ? run_occupancy_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
