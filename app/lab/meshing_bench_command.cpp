// `cubeforge-lab bench-meshing`: what coarse-to-fine evaluation costs and
// whether it finds the dense grid's surface, on shapes the model generates or
// on random tokens of a random-weight shape tokenizer of the real sizes
// (`--shape v05`).
//
// For every object: latents, then the occupancy grid coarse-to-fine with the
// given settings (points evaluated per level, occupancy and marching cubes
// time), with full attention and with each latent top-k asked for, in turn
// for every round; and once densely (time, and the grid points whose
// inside/outside class differs: zero means marching cubes sees exactly the
// dense surface). A top-k run is also compared with the full-attention one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_models.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/geometry/marching_cubes.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/model/latent_selection.h"
#include "inference/model/occupancy_slices.h"
#include "inference/model/random_weights.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kMeshingCommand = "bench-meshing";

struct MeshingBenchOptions {
  LabOptions lab;
  std::string shape;  // a random-weight shape tokenizer of these sizes instead of a model
  int objects = 1;
  uint64_t seed = 1;
  int resolution = 7;
  int rounds = 1;
  std::vector<int64_t> latent_top_k;  // besides full attention, which always runs first
  bool skip_dense = false;
  CoarseToFineOptions refinement = [] {
    CoarseToFineOptions o;
    o.evaluation.chunk_points = 8192;  // as generation evaluates
    return o;
  }();
};

// One coarse-to-fine evaluation setting (full attention, or a latent top-k) on one object.
struct VariantFigures {
  int64_t top_k = 0;
  std::vector<double> occupancy_ms, meshing_ms;  // per round
  std::vector<double> occupancy_cpu_ms;          // per round: CPU time of all threads
  CoarseToFineStats stats;
  LatentSelectionField::Stats selection;
  int64_t faces = 0;
  int64_t full_attention_disagreements = -1;  // grid points classified unlike full attention's (top-k only)
  int64_t dense_disagreements = -1;           // unlike the dense grid's; -1: not compared
};

struct ObjectFigures {
  std::string name;
  std::vector<VariantFigures> variants;  // full attention first
  double dense_ms = 0;
};

Result<ObjectFigures> measure_latents(const ShapeTokenizer& shape, std::span<const float> latents,
                                      const std::string& name, const MeshingBenchOptions& o) {
  ObjectFigures figures;
  figures.name = name;
  CUBEFORGE_ASSIGN_OR_RETURN(PreparedLatents prepared, shape.prepare_latents(latents));
  GridSpec spec;
  spec.resolution = o.resolution;
  const ShapeTokenizer::GridQueries grid_queries = shape.prepare_grid(grid_axis_coordinates(spec));
  const GridFieldFunction full_attention = [&](std::span<const int32_t> ijk, std::span<float> values) -> Status {
    return occupancy_on_grid_in_slices(shape, prepared, grid_queries, ijk, values);
  };
  std::optional<ScalarGrid> dense;
  if (!o.skip_dense) {
    const auto start = std::chrono::steady_clock::now();
    CUBEFORGE_ASSIGN_OR_RETURN(dense, evaluate_grid_field_dense(full_attention, spec, o.refinement.evaluation));
    figures.dense_ms = ms_since(start);
  }
  figures.variants.push_back(VariantFigures{});
  for (int64_t k : o.latent_top_k)
    if (k > 0) {
      figures.variants.emplace_back();
      figures.variants.back().top_k = k;
    }
  std::optional<ScalarGrid> full_attention_grid;  // the first round's, to compare the top-k grids with
  for (int round = 0; round < o.rounds; ++round) {
    for (VariantFigures& variant : figures.variants) {
      CoarseToFineOptions refinement = o.refinement;
      GridFieldFunction field = full_attention;
      std::optional<LatentSelectionField> selection;
      if (variant.top_k > 0) {
        CUBEFORGE_ASSIGN_OR_RETURN(selection,
                                   LatentSelectionField::create(shape, prepared, grid_queries, spec, variant.top_k));
        field = selection->attach(refinement);
      }
      auto start = std::chrono::steady_clock::now();
      const double cpu_start = process_cpu_ms();
      CUBEFORGE_ASSIGN_OR_RETURN(CoarseToFineGrid refined, evaluate_grid_field_coarse_to_fine(field, spec, refinement));
      variant.occupancy_ms.push_back(ms_since(start));
      variant.occupancy_cpu_ms.push_back(process_cpu_ms() - cpu_start);
      start = std::chrono::steady_clock::now();
      CUBEFORGE_ASSIGN_OR_RETURN(Mesh mesh, marching_cubes(refined.grid));
      variant.meshing_ms.push_back(ms_since(start));
      if (round > 0) continue;
      variant.stats = refined.stats;
      if (selection) variant.selection = selection->stats();
      variant.faces = int64_t(mesh.face_count());
      if (dense) variant.dense_disagreements = count_sign_disagreements(*dense, refined.grid, o.refinement.level);
      if (variant.top_k == 0)
        full_attention_grid = std::move(refined.grid);
      else
        variant.full_attention_disagreements =
            count_sign_disagreements(*full_attention_grid, refined.grid, o.refinement.level);
    }
  }
  return figures;
}

Result<ObjectFigures> measure_prompt(const CubeModel& model, const std::string& prompt, const MeshingBenchOptions& o) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond, encode_prompt(model, prompt, std::nullopt));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> uncond, encode_prompt(model, "", std::nullopt));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<int> tokens, generate_tokens(model.gpt(), cond, uncond, model.shape_tokens(),
                                                                      TokenGenerationOptions{}));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> latents,
                             model.shape().decode_tokens(std::vector<int64_t>(tokens.begin(), tokens.end())));
  return measure_latents(model.shape(), latents, prompt, o);
}

// Latents of random tokens: on random weights they are as much an object as any.
Result<ObjectFigures> measure_random_object(const ShapeTokenizer& shape, uint64_t seed, const MeshingBenchOptions& o) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> tokens(static_cast<size_t>(shape.config().latents));
  for (int64_t& t : tokens) t = int64_t(rng() % uint64_t(shape.config().codes));
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> latents, shape.decode_tokens(tokens));
  return measure_latents(shape, latents, "random tokens, seed " + std::to_string(seed), o);
}

nlohmann::json levels_json(const CoarseToFineStats& stats) {
  nlohmann::json levels = nlohmann::json::array();
  for (const CoarseToFineLevel& level : stats.levels)
    levels.push_back({{"resolution", level.resolution},
                      {"evaluated_points", level.evaluated_points},
                      {"surface_cells", level.surface_cells}});
  return levels;
}

double points_per_second(const VariantFigures& v) {
  const double ms = median(v.occupancy_ms);
  return ms > 0 ? double(v.stats.evaluated_points) / (ms / 1e3) : 0.0;
}

void print_json(const MeshingBenchOptions& o, const std::string& model_name, const std::vector<ObjectFigures>& rows) {
  nlohmann::json j;
  j["model"] = model_name;
  j["resolution"] = o.resolution;
  j["rounds"] = o.rounds;
  j["settings"] = {{"coarse_resolution", o.refinement.coarse_resolution},
                   {"dilation", o.refinement.dilation},
                   {"near_surface_margin", o.refinement.near_surface_margin},
                   {"final_near_surface_margin", o.refinement.final_near_surface_margin}};
  int64_t evaluated = 0, disagreements = 0, final_surface_cells = 0;
  double c2f_ms = 0, dense_ms = 0;
  std::vector<double> selection_ms(rows.front().variants.size(), 0.0);
  std::vector<int64_t> selection_disagreements(rows.front().variants.size(), 0);
  for (const ObjectFigures& r : rows) {
    const VariantFigures& full = r.variants.front();
    nlohmann::json row = {{"prompt", r.name},
                          {"evaluated_points", full.stats.evaluated_points},
                          {"dense_points", full.stats.dense_points},
                          {"coarse_to_fine_ms", median(full.occupancy_ms)},
                          {"occupancy_ms", median(full.occupancy_ms)},
                          {"occupancy_ms_rounds", full.occupancy_ms},
                          {"occupancy_cpu_ms", median(full.occupancy_cpu_ms)},
                          {"meshing_ms", median(full.meshing_ms)},
                          {"points_per_second", points_per_second(full)},
                          {"faces", full.faces},
                          {"levels", levels_json(full.stats)}};
    if (full.dense_disagreements >= 0) {
      row["dense_ms"] = r.dense_ms;
      row["sign_disagreements"] = full.dense_disagreements;
    }
    for (size_t v = 1; v < r.variants.size(); ++v) {
      const VariantFigures& s = r.variants[v];
      nlohmann::json entry = {{"top_k", s.top_k},
                              {"occupancy_ms", median(s.occupancy_ms)},
                              {"occupancy_ms_rounds", s.occupancy_ms},
                              {"occupancy_cpu_ms", median(s.occupancy_cpu_ms)},
                              {"speed_up", median(full.occupancy_ms) / median(s.occupancy_ms)},
                              {"meshing_ms", median(s.meshing_ms)},
                              {"evaluated_points", s.stats.evaluated_points},
                              {"points_per_second", points_per_second(s)},
                              {"faces", s.faces},
                              {"sign_disagreements", s.full_attention_disagreements},
                              {"blocks", s.selection.blocks},
                              {"inherited_blocks", s.selection.inherited_blocks},
                              {"levels", levels_json(s.stats)}};
      if (s.dense_disagreements >= 0) entry["dense_sign_disagreements"] = s.dense_disagreements;
      row["latent_selection"].push_back(entry);
      selection_ms[v] += median(s.occupancy_ms);
      selection_disagreements[v] += s.full_attention_disagreements;
    }
    j["prompts"].push_back(row);
    evaluated += full.stats.evaluated_points;
    final_surface_cells += full.stats.levels.back().surface_cells;
    c2f_ms += median(full.occupancy_ms);
    dense_ms += r.dense_ms;
    disagreements += std::max<int64_t>(0, full.dense_disagreements);
  }
  const int64_t dense_points = rows.front().variants.front().stats.dense_points;
  j["total"] = {
      {"evaluated_points", evaluated},
      {"fraction_of_dense", double(evaluated) / double(dense_points * int64_t(rows.size()))},
      {"points_per_final_surface_cell", final_surface_cells ? double(evaluated) / double(final_surface_cells) : 0.0},
      {"coarse_to_fine_ms", c2f_ms},
      {"occupancy_ms", c2f_ms}};
  if (!o.skip_dense) {
    j["total"]["dense_ms"] = dense_ms;
    j["total"]["sign_disagreements"] = disagreements;
  }
  for (size_t v = 1; v < selection_ms.size(); ++v)
    j["total"]["latent_selection"].push_back({{"top_k", rows.front().variants[v].top_k},
                                              {"occupancy_ms", selection_ms[v]},
                                              {"sign_disagreements", selection_disagreements[v]}});
  print_lab_report(kMeshingCommand, j);
}

void print_table(const MeshingBenchOptions& o, const std::string& model_name, const std::vector<ObjectFigures>& rows) {
  std::printf(
      "%s; resolution %d, coarse level %d, dilation %d, near-surface margin %.2f (last level %.2f), "
      "%d threads, %d round%s\n",
      model_name.c_str(), o.resolution, o.refinement.coarse_resolution, o.refinement.dilation,
      o.refinement.near_surface_margin, o.refinement.final_near_surface_margin, cpu::thread_count(), o.rounds,
      o.rounds == 1 ? "" : "s");
  std::printf("%-34s %6s %10s %8s %11s %8s %9s %9s %9s %8s\n", "object", "top-k", "points", "of dense", "occupancy ms",
              "mesh ms", "points/s", "dense ms", "differ", "faces");
  int64_t evaluated = 0, disagreements = 0, final_surface_cells = 0;
  double c2f_ms = 0, dense_ms = 0;
  for (const ObjectFigures& r : rows) {
    for (const VariantFigures& v : r.variants) {
      std::printf("%-34.34s %6s %10lld %7.1f%% %11.1f %8.1f %9.0f ", v.top_k == 0 ? r.name.c_str() : "",
                  v.top_k == 0 ? "all" : std::to_string(v.top_k).c_str(), (long long)v.stats.evaluated_points,
                  100.0 * double(v.stats.evaluated_points) / double(v.stats.dense_points), median(v.occupancy_ms),
                  median(v.meshing_ms), points_per_second(v));
      if (v.top_k == 0 && v.dense_disagreements >= 0)
        std::printf("%9.1f %9lld", r.dense_ms, (long long)v.dense_disagreements);
      else if (v.top_k > 0)
        std::printf("%9s %9lld", "", (long long)v.full_attention_disagreements);
      else
        std::printf("%9s %9s", "-", "-");
      std::printf(" %8lld\n", (long long)v.faces);
    }
    const VariantFigures& full = r.variants.front();
    evaluated += full.stats.evaluated_points;
    final_surface_cells += full.stats.levels.back().surface_cells;
    c2f_ms += median(full.occupancy_ms);
    dense_ms += r.dense_ms;
    disagreements += std::max<int64_t>(0, full.dense_disagreements);
  }
  const int64_t dense_points = rows.front().variants.front().stats.dense_points;
  std::printf(
      "total (full attention): %lld points (%.1f%% of dense, %.1f per final surface cell), %.0f ms "
      "coarse-to-fine",
      (long long)evaluated, 100.0 * double(evaluated) / double(dense_points * int64_t(rows.size())),
      final_surface_cells ? double(evaluated) / double(final_surface_cells) : 0.0, c2f_ms);
  if (!o.skip_dense)
    std::printf(", %.0f ms dense, %lld grid points classified differently", dense_ms, (long long)disagreements);
  std::printf("\n");
  if (rows.front().variants.size() > 1)
    std::printf("differ: against the dense grid for full attention, against full attention for a top-k\n");
}

// The objects of a --shape run: random tokens of random weights, one seed each.
Result<std::vector<ObjectFigures>> measure_random_objects(const MeshingBenchOptions& o) {
  CUBEFORGE_ASSIGN_OR_RETURN(ShapeTokenizer shape, random_shape_tokenizer(o.shape, o.seed));
  for (int64_t k : o.latent_top_k) CUBEFORGE_TRY(check_latent_selection(k, true, shape.config().latents));
  std::vector<ObjectFigures> rows;
  for (int i = 0; i < o.objects; ++i) {
    const uint64_t seed = o.seed + uint64_t(i);
    auto figures = measure_random_object(shape, seed, o);
    if (!figures.ok())
      return make_error(figures.error().code,
                        "'random tokens, seed " + std::to_string(seed) + "': " + figures.error().message);
    rows.push_back(std::move(*figures));
  }
  return rows;
}

// The objects of the captions, generated by `model`.
Result<std::vector<ObjectFigures>> measure_captions(const CubeModel& model, const std::vector<std::string>& prompts,
                                                    const MeshingBenchOptions& o) {
  for (int64_t k : o.latent_top_k) CUBEFORGE_TRY(check_latent_selection(k, true, model.shape().config().latents));
  std::vector<ObjectFigures> rows;
  for (const std::string& prompt : prompts) {
    auto figures = measure_prompt(model, prompt, o);
    if (!figures.ok())
      return make_error(figures.error().code, "'" + readable_untrusted(prompt) + "': " + figures.error().message);
    rows.push_back(std::move(*figures));
  }
  return rows;
}

int run_meshing_bench(const MeshingBenchOptions& o) {
  apply_lab_threads(o.lab);
  Result<std::vector<ObjectFigures>> rows = std::vector<ObjectFigures>{};
  std::string model_name;
  if (!o.shape.empty()) {
    if (!o.lab.prompts.empty() || !o.lab.prompts_file.empty() || o.lab.model_given) {
      std::fprintf(stderr,
                   "%s: --shape measures random tokens of random weights; leave out --model, --prompt and "
                   "--prompts\n",
                   kMeshingCommand);
      return 2;
    }
    model_name = random_shape_tokenizer_name(o.shape, o.seed);
    rows = measure_random_objects(o);
  } else {
    const auto prompts = lab_prompts(o.lab);
    if (!prompts.ok()) {
      std::fprintf(stderr, "%s: %s, or --shape small|v01|v05 for random tokens of random weights\n", kMeshingCommand,
                   prompts.error().to_string().c_str());
      return 2;
    }
    const auto folder = lab_model_folder(o.lab, kMeshingCommand);
    if (!folder) return 2;
    auto model = load_model_or_report(*folder, kMeshingCommand);
    if (!model) return 1;
    model_name = readable_untrusted(folder->string());
    rows = measure_captions(*model, *prompts, o);
  }
  if (!rows.ok()) {
    print_error(kMeshingCommand, rows.error());
    return exit_status_of(rows.error());
  }
  if (o.lab.json)
    print_json(o, model_name, *rows);
  else
    print_table(o, model_name, *rows);
  return 0;
}

}  // namespace

Action add_meshing_bench_command(CLI::App& app) {
  auto options = std::make_shared<MeshingBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      kMeshingCommand, "Measure coarse-to-fine occupancy evaluation against the dense grid on generated shapes");
  add_lab_options(cmd, options->lab, kAllLabOptions);
  cmd->add_option("--shape", options->shape,
                  "Random-weight shape tokenizer of these sizes instead, meshing random tokens: small, v01 or v05")
      ->check(CLI::IsMember({"small", "v01", "v05"}));
  cmd->add_option("--objects", options->objects, "With --shape: objects to mesh (seeds --seed, --seed + 1, ...)")
      ->check(whole_number_in(1, 1000, "random token sequences"));
  cmd->add_option("--seed", options->seed, "With --shape: seed of the random weights and the first object's tokens")
      ->check(seed_number());
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
  cmd->add_option("--latent-top-k", options->latent_top_k,
                  "Also evaluate with each block of grid points attending to its K heaviest latents (a comma list; "
                  "0 is full attention, which always runs first), compared with full attention")
      ->delimiter(',')
      ->check(whole_number_in(0, 65536, "latents per block; 0 is full attention"));
  cmd->add_option("--rounds", options->rounds, "Times every setting runs, in turn (the median time is reported)")
      ->check(whole_number_in(1, 100, "rounds of all settings"));
  cmd->add_flag("--no-dense", options->skip_dense, "Skip the dense grid (no time or agreement figures)");
  return [cmd, options]() -> int { return cmd->parsed() ? run_meshing_bench(*options) : -1; };
}

}  // namespace cubeforge::cli
