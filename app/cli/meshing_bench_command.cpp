// `cubeforge-cli bench-meshing`: what coarse-to-fine evaluation costs and
// whether it finds the dense grid's surface, on shapes the model generates.
//
// For every prompt: greedy tokens, latents, then the occupancy grid twice:
// coarse-to-fine with the given settings (points evaluated per level, time)
// and densely (time, and the grid points whose inside/outside class differs:
// zero means marching cubes sees exactly the dense surface).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "app/cli/commands.h"
#include "app/cli/model_option.h"
#include "inference/cpu/ops.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

struct MeshingBenchOptions {
  std::string model_dir;
  std::vector<std::string> prompts;
  std::string prompts_file;
  int resolution = 7;
  int threads = 0;
  bool skip_dense = false;
  bool json = false;
  CoarseToFineOptions refinement = [] {
    CoarseToFineOptions o;
    o.evaluation.chunk_points = 8192;  // as generation evaluates
    return o;
  }();
};

struct PromptFigures {
  std::string prompt;
  CoarseToFineStats stats;
  double coarse_to_fine_ms = 0;
  double dense_ms = 0;
  int64_t sign_disagreements = -1;  // -1: not compared
  int64_t faces = 0;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Result<PromptFigures> measure_prompt(const CubeModel& model, const std::string& prompt, const MeshingBenchOptions& o) {
  PromptFigures figures;
  figures.prompt = prompt;
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond, encode_prompt(model, prompt, std::nullopt));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> uncond, encode_prompt(model, "", std::nullopt));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<int> tokens,
                             generate_tokens(model.gpt(), cond, uncond, model.shape_tokens(), TokenGenerationOptions{}));
  const ShapeTokenizer& shape = model.shape();
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> latents,
                             shape.decode_tokens(std::vector<int64_t>(tokens.begin(), tokens.end())));
  CUBEFORGE_ASSIGN_OR_RETURN(PreparedLatents prepared, shape.prepare_latents(latents));

  GridSpec spec;
  spec.resolution = o.resolution;
  const ShapeTokenizer::GridQueries grid_queries = shape.prepare_grid(grid_axis_coordinates(spec));
  const GridFieldFunction field = [&](std::span<const int32_t> ijk, std::span<float> values) -> Status {
    return occupancy_on_grid_in_slices(shape, prepared, grid_queries, ijk, values);
  };
  auto start = std::chrono::steady_clock::now();
  CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid refined, evaluate_grid_field_coarse_to_fine(field, spec, o.refinement));
  figures.coarse_to_fine_ms = ms_since(start);
  figures.stats = refined.stats;
  CUBEFORGE_ASSIGN_OR_RETURN(Mesh mesh, marching_cubes(refined.grid));
  figures.faces = int64_t(mesh.face_count());
  if (!o.skip_dense) {
    start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(ScalarGrid dense, evaluate_grid_field_dense(field, spec, o.refinement.evaluation));
    figures.dense_ms = ms_since(start);
    figures.sign_disagreements = count_sign_disagreements(dense, refined.grid, o.refinement.level);
  }
  return figures;
}

std::optional<std::vector<std::string>> read_prompts(const MeshingBenchOptions& o) {
  std::vector<std::string> prompts = o.prompts;
  if (!o.prompts_file.empty()) {
    std::ifstream in(o.prompts_file);
    if (!in) {
      std::fprintf(stderr, "bench-meshing: cannot read the prompts file '%s'\n", o.prompts_file.c_str());
      return std::nullopt;
    }
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
      if (!line.empty() && line[0] != '#') prompts.push_back(line);
    }
  }
  if (prompts.empty()) {
    std::fprintf(stderr, "bench-meshing: no prompts; pass --prompt TEXT (repeatable) or --prompts FILE\n");
    return std::nullopt;
  }
  return prompts;
}

int run_meshing_bench(const MeshingBenchOptions& o) {
  if (o.threads > 0) cpu::set_thread_count(o.threads);
  const auto prompts = read_prompts(o);
  if (!prompts) return 2;
  const auto folder = model_folder_or_report(o.model_dir, /*given_on_command_line=*/false, "bench-meshing");
  if (!folder) return 1;
  auto model = load_model_or_report(*folder, "bench-meshing");
  if (!model) return 1;

  std::vector<PromptFigures> rows;
  for (const std::string& prompt : *prompts) {
    auto figures = measure_prompt(*model, prompt, o);
    if (!figures.ok()) {
      std::fprintf(stderr, "bench-meshing: '%s': %s\n", prompt.c_str(), figures.error().to_string().c_str());
      return 1;
    }
    rows.push_back(std::move(*figures));
  }

  int64_t evaluated = 0, disagreements = 0, final_surface_cells = 0;
  double c2f_ms = 0, dense_ms = 0;
  for (const PromptFigures& r : rows) {
    evaluated += r.stats.evaluated_points;
    final_surface_cells += r.stats.levels.back().surface_cells;
    c2f_ms += r.coarse_to_fine_ms;
    dense_ms += r.dense_ms;
    disagreements += std::max<int64_t>(0, r.sign_disagreements);
  }
  const int64_t dense_points = rows.front().stats.dense_points;
  const double points_per_surface_cell = final_surface_cells ? double(evaluated) / double(final_surface_cells) : 0.0;

  if (o.json) {
    nlohmann::json j;
    j["resolution"] = o.resolution;
    j["threads"] = cpu::thread_count();
    j["settings"] = {{"coarse_resolution", o.refinement.coarse_resolution},
                     {"dilation", o.refinement.dilation},
                     {"near_surface_margin", o.refinement.near_surface_margin},
                     {"final_near_surface_margin", o.refinement.final_near_surface_margin}};
    for (const PromptFigures& r : rows) {
      nlohmann::json row = {{"prompt", r.prompt},
                            {"evaluated_points", r.stats.evaluated_points},
                            {"dense_points", r.stats.dense_points},
                            {"coarse_to_fine_ms", r.coarse_to_fine_ms},
                            {"faces", r.faces}};
      for (const CoarseToFineLevel& level : r.stats.levels)
        row["levels"].push_back({{"resolution", level.resolution},
                                 {"evaluated_points", level.evaluated_points},
                                 {"surface_cells", level.surface_cells}});
      if (r.sign_disagreements >= 0) {
        row["dense_ms"] = r.dense_ms;
        row["sign_disagreements"] = r.sign_disagreements;
      }
      j["prompts"].push_back(row);
    }
    j["total"] = {{"evaluated_points", evaluated},
                  {"fraction_of_dense", double(evaluated) / double(dense_points * int64_t(rows.size()))},
                  {"points_per_final_surface_cell", points_per_surface_cell},
                  {"coarse_to_fine_ms", c2f_ms}};
    if (!o.skip_dense) {
      j["total"]["dense_ms"] = dense_ms;
      j["total"]["sign_disagreements"] = disagreements;
    }
    std::cout << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("resolution %d, coarse level %d, dilation %d, near-surface margin %.2f (last level %.2f), %d threads\n",
              o.resolution, o.refinement.coarse_resolution, o.refinement.dilation, o.refinement.near_surface_margin,
              o.refinement.final_near_surface_margin, cpu::thread_count());
  std::printf("%-40s %10s %8s %9s %9s %9s %8s\n", "prompt", "points", "of dense", "c2f ms", "dense ms", "differ", "faces");
  for (const PromptFigures& r : rows) {
    std::printf("%-40.40s %10lld %7.1f%% %9.1f ", r.prompt.c_str(), (long long)r.stats.evaluated_points,
                100.0 * double(r.stats.evaluated_points) / double(r.stats.dense_points), r.coarse_to_fine_ms);
    if (r.sign_disagreements >= 0)
      std::printf("%9.1f %9lld", r.dense_ms, (long long)r.sign_disagreements);
    else
      std::printf("%9s %9s", "-", "-");
    std::printf(" %8lld\n", (long long)r.faces);
  }
  std::printf("total: %lld points (%.1f%% of dense, %.1f per final surface cell), %.0f ms coarse-to-fine", (long long)evaluated,
              100.0 * double(evaluated) / double(dense_points * int64_t(rows.size())), points_per_surface_cell, c2f_ms);
  if (!o.skip_dense) std::printf(", %.0f ms dense, %lld grid points classified differently", dense_ms, (long long)disagreements);
  std::printf("\n");
  return 0;
}

}  // namespace

Action add_meshing_bench_command(CLI::App& app) {
  auto options = std::make_shared<MeshingBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench-meshing", "Measure coarse-to-fine occupancy evaluation against the dense grid on generated shapes");
  cmd->add_option("--model", options->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--prompt", options->prompts, "A prompt (repeatable)");
  cmd->add_option("--prompts", options->prompts_file, "A file of prompts, one per line (# starts a comment)");
  cmd->add_option("--resolution", options->resolution, "Grid resolution: (2^r + 1)^3 points")->check(CLI::Range(2, 10));
  cmd->add_option("--coarse", options->refinement.coarse_resolution, "First, dense level of coarse-to-fine")
      ->check(CLI::Range(1, 10));
  cmd->add_option("--dilation", options->refinement.dilation, "Cells of safety margin around refined cells")
      ->check(CLI::Range(0, 8));
  cmd->add_option("--margin", options->refinement.near_surface_margin,
                  "Near-surface margin in units of the local slope (see CoarseToFineOptions)")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--final-margin", options->refinement.final_near_surface_margin,
                  "The same margin for the level below the target")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--threads", options->threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--no-dense", options->skip_dense, "Skip the dense grid (no time or agreement figures)");
  cmd->add_flag("--json", options->json, "Print one JSON object");
  return [cmd, options]() -> int { return cmd->parsed() ? run_meshing_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
