// `cubeforge-cli generate`: a prompt to a mesh file.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/model_option.h"
#include "app/cli/progress.h"
#include "inference/cpu/ops.h"
#include "inference/geometry/mesh_io.h"
#include "inference/geometry/mesh_metrics.h"

namespace cubeforge::cli {

namespace {

std::atomic<bool> g_interrupted{false};

struct GenerateOptions {
  std::string model_dir, prompt, out;
  uint64_t seed = 0;
  float guidance = 3.0f;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool sample = false;
  std::vector<float> bbox;
  int resolution = 8;
  std::string attention = "causal";
  bool no_kv_cache = false;
  std::string decoding = "sequential";
  float threshold = DiffusionOptions{}.threshold;
  float factor = 0.f;
  std::string diffusion_cache = "dual";
  int block_size = 0;
  int sub_block_size = 0;
  int guesses = JacobiOptions{}.max_guesses;
  float guess_cost = JacobiOptions{}.position_cost;
  bool dense = false;
  bool reference_mapping = false;
  bool keep_floaters = false;
  int64_t target_faces = 0;
  int threads = 0;
  bool json = false;
  bool quiet = false;
};

nlohmann::json timings_json(const StageTimings& t) {
  return {{"text_ms", t.text_ms},           {"prefill_ms", t.prefill_ms},     {"decode_ms", t.decode_ms},
          {"shape_decode_ms", t.shape_decode_ms}, {"occupancy_ms", t.occupancy_ms}, {"meshing_ms", t.meshing_ms},
          {"cleanup_ms", t.cleanup_ms},     {"total_ms", t.total_ms()}};
}

nlohmann::json decoding_json(const DecodingStats& stats, const DecodingOptions& options) {
  nlohmann::json j = {{"mode", decoding_mode_name(stats.mode)},
                      {"model_evaluations", stats.model_evaluations},
                      {"tokens_per_evaluation", stats.tokens_per_evaluation()},
                      {"tokens_per_step", stats.tokens_per_step},
                      {"positions_per_step", stats.positions_per_step}};
  if (stats.mode == DecodingMode::kJacobi) {
    j["max_guesses"] = options.jacobi.max_guesses;
    j["guess_cost"] = options.jacobi.position_cost;
    j["guessed"] = stats.guessed;
    j["guesses_accepted"] = stats.guesses_accepted;
  } else if (stats.mode == DecodingMode::kDiffusion) {
    j["cache"] = diffusion_cache_name(options.diffusion.cache);
    if (options.diffusion.factor > 0.f)
      j["factor"] = options.diffusion.factor;
    else
      j["threshold"] = options.diffusion.threshold;
  }
  return j;
}

// Exact parallel decoding's speed-up, measured in the same run: the prompt's
// tokens decoded sequentially and in parallel, alternating, three times each
// (the medians), and whether the sequential tokens equal the generation's.
struct SequentialComparison {
  double sequential_ms = 0, parallel_ms = 0;
  bool tokens_equal = false;
};

Result<SequentialComparison> compare_with_sequential(const CubeModel& model, const GenerationRequest& request,
                                                     const std::vector<int>& tokens) {
  std::optional<std::array<float, 3>> bbox;
  if (request.bbox) {
    CUBEFORGE_ASSIGN_OR_RETURN(bbox, normalize_bbox(*request.bbox));
  }
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond, encode_prompt(model, request.prompt, bbox));
  std::vector<float> uncond;
  if (request.guidance_scale > 0.f) {
    CUBEFORGE_ASSIGN_OR_RETURN(uncond, encode_prompt(model, "", std::nullopt));
  }
  TokenGenerationOptions generation;
  generation.guidance_scale = request.guidance_scale;
  generation.attention = request.attention;
  DecodingOptions sequential_decoding = request.decoding;
  sequential_decoding.mode = DecodingMode::kSequential;
  std::vector<double> times[2];
  SequentialComparison comparison;
  for (int round = 0; round < 3; ++round)
    for (int parallel = 0; parallel < 2; ++parallel) {
      const auto start = std::chrono::steady_clock::now();
      CUBEFORGE_ASSIGN_OR_RETURN(DecodedTokens decoded,
                                 decode_tokens(model.gpt(), cond, uncond, model.shape_tokens(), generation,
                                               parallel ? request.decoding : sequential_decoding));
      times[parallel].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!parallel) comparison.tokens_equal = decoded.tokens == tokens;
    }
  for (auto& t : times) std::sort(t.begin(), t.end());
  comparison.sequential_ms = times[0][1];
  comparison.parallel_ms = times[1][1];
  return comparison;
}

int run_generate(GenerateOptions o) {
  cpu::set_thread_count(o.threads);
  if (o.out.empty()) o.out = "cubeforge.glb";
  auto format = mesh_file_format_from_path(o.out);
  if (!format.ok()) {
    std::fprintf(stderr, "generate: %s\n", format.error().to_string().c_str());
    return 2;
  }
  if (!output_folder_writable(o.out, "generate")) return 1;
  auto model = load_model_or_report(o.model_dir, "generate");
  if (!model) return 1;

  if (model->tokenizer().encode(o.prompt).truncated && !o.json)
    std::fprintf(stderr, "generate: note: the prompt is longer than CLIP's 75 tokens; the rest is ignored\n");
  GenerationRequest request;
  request.prompt = o.prompt;
  request.seed = o.seed;
  request.guidance_scale = o.guidance;
  request.sampling.greedy = !(o.sample || o.top_k > 0 || o.top_p < 1.0f || o.temperature != 1.0f);
  request.sampling.temperature = o.temperature;
  request.sampling.top_k = o.top_k;
  request.sampling.top_p = o.top_p;
  if (!o.bbox.empty()) request.bbox = std::array<float, 3>{o.bbox[0], o.bbox[1], o.bbox[2]};
  request.resolution = o.resolution;
  request.attention = o.attention == "reference" ? AttentionMode::kReference : AttentionMode::kCausal;
  request.use_kv_cache = !o.no_kv_cache;
  request.decoding.mode = *parse_decoding_mode(o.decoding);
  request.decoding.jacobi.max_guesses = o.guesses;
  request.decoding.jacobi.position_cost = o.guess_cost;
  request.decoding.diffusion.threshold = o.threshold;
  request.decoding.diffusion.factor = o.factor;
  request.decoding.diffusion.cache = *parse_diffusion_cache(o.diffusion_cache);
  request.decoding.diffusion.block_size = o.block_size;
  request.decoding.diffusion.sub_block_size = o.sub_block_size;
  request.coarse_to_fine = !o.dense;
  request.vertex_mapping = o.reference_mapping ? VertexMapping::kReference : VertexMapping::kCellSize;
  request.remove_floaters = !o.keep_floaters;
  request.target_faces = o.target_faces;

  std::signal(SIGINT, [](int) { g_interrupted.store(true); });
  ProgressLine progress(!o.quiet && !o.json && isatty(STDERR_FILENO));
  auto result = generate_shape(*model, request, [&](const GenerationEvent& e) { progress.on_event(e); },
                               &g_interrupted);
  progress.finish();
  if (!result.ok()) {
    std::fprintf(stderr, "generate: %s\n", result.error().to_string().c_str());
    return result.error().code == ErrorCode::kCancelled ? 130 : 1;
  }
  if (!result->stats.has_surface) {
    std::fprintf(stderr, "generate: the decoded shape has no surface at resolution %d; try another seed or prompt\n",
                 o.resolution);
    return 1;
  }
  Status saved = export_mesh(result->mesh, o.out, *format);
  if (!saved.ok()) {
    std::fprintf(stderr, "generate: %s\n", saved.error().to_string().c_str());
    return 1;
  }
  std::optional<SequentialComparison> sequential;
  if (request.decoding.mode == DecodingMode::kJacobi) {
    auto compared = compare_with_sequential(*model, request, result->tokens);
    if (!compared.ok()) {
      std::fprintf(stderr, "generate: %s\n", compared.error().to_string().c_str());
      return 1;
    }
    sequential = *compared;
  }
  // Watertightness is what 3D printing and boolean tools need; say it for the mesh as written.
  const MeshTopology topology = analyze_topology(result->mesh);
  if (o.json) {
    nlohmann::json report = {
        {"prompt", o.prompt},
        {"seed", o.seed},
        {"model", model->folder().string()},
        {"tokens", result->tokens},
        {"timings", timings_json(result->timings)},
        {"time_to_first_token_ms", result->time_to_first_token_ms},
        {"tokens_per_second", result->tokens_per_second},
        {"mesh",
         {{"vertices", result->stats.vertices},
          {"faces", result->stats.faces},
          {"faces_before_cleanup", result->stats.faces_before_cleanup},
          {"occupancy_points", result->stats.occupancy_points},
          {"dense_points", result->stats.dense_points},
          {"floaters_removed", result->stats.floaters_removed},
          {"simplification",
           {{"fins_removed", result->stats.simplification.fins_removed},
            {"vertices_split", result->stats.simplification.vertices_split},
            {"retries_to_stay_closed", result->stats.simplification.retries_to_stay_closed},
            {"left_unsimplified_to_stay_closed", result->stats.simplification.left_unsimplified_to_stay_closed}}},
          {"closed", topology.closed_and_oriented()},
          {"boundary_edges", topology.boundary_edges},
          {"non_manifold_edges", topology.non_manifold_edges},
          {"components", topology.components}}},
        {"output", o.out},
    };
    nlohmann::json& decoding = report["decoding"] = decoding_json(result->decoding, request.decoding);
    if (sequential) {
      decoding["sequential_token_ms"] = sequential->sequential_ms;
      decoding["parallel_token_ms"] = sequential->parallel_ms;
      decoding["speedup_over_sequential"] = sequential->sequential_ms / std::max(1e-9, sequential->parallel_ms);
      decoding["tokens_equal_sequential"] = sequential->tokens_equal;
    }
    std::cout << report.dump() << std::endl;
  } else {
    print_timing_table(*result, stdout);
    if (sequential)
      std::printf("exact parallel decoding: %.1f ms for the tokens against %.1f ms sequentially (%.2fx, medians of "
                  "3 alternating), %s\n",
                  sequential->parallel_ms, sequential->sequential_ms,
                  sequential->sequential_ms / std::max(1e-9, sequential->parallel_ms),
                  sequential->tokens_equal ? "the same tokens" : "DIFFERENT TOKENS");
    std::printf("wrote %s (%lld faces, %s)\n", o.out.c_str(), static_cast<long long>(topology.faces),
                topology.closed_and_oriented() ? "watertight" : "not watertight");
  }
  return 0;
}

}  // namespace

Action add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Turn a prompt into a mesh file");
  cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--prompt,-p", o->prompt, "What to make")->required();
  cmd->add_option("--out,-o", o->out, "Output mesh: .glb, .obj, .stl or .ply (default cubeforge.glb)");
  cmd->add_option("--seed", o->seed, "Seed for sampling");
  cmd->add_option("--guidance", o->guidance, "Classifier-free guidance scale (0: off)")->check(CLI::Range(0.0, 100.0));
  cmd->add_flag("--sample", o->sample, "Sample instead of greedy decoding");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature")->check(CLI::PositiveNumber);
  cmd->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling mass (1: off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--bbox", o->bbox, "Bounding box size X Y Z (scaled so the largest side is 1.925)")->expected(3);
  cmd->add_option("--resolution", o->resolution, "Grid resolution: (2^R + 1)^3 points")->check(CLI::Range(2, 10));
  cmd->add_option("--attention", o->attention, "causal (correct) or reference (the reference's KV-cache quirk)")
      ->check(CLI::IsMember({"causal", "reference"}));
  cmd->add_flag("--no-kv-cache", o->no_kv_cache, "Recompute the whole sequence every step");
  cmd->add_option("--decoding", o->decoding,
                  "sequential (default), jacobi (exact parallel decoding of an autoregressive model, greedy) or "
                  "diffusion (a block-diffusion model folder)")
      ->check(CLI::IsMember({"sequential", "jacobi", "diffusion"}));
  cmd->add_option("--guesses", o->guesses, "Jacobi: tokens guessed ahead at most")->check(CLI::Range(0, 64));
  cmd->add_option("--guess-cost", o->guess_cost,
                  "Jacobi: what one more position costs in an evaluation, relative to one (0: always guess)")
      ->check(CLI::Range(0.0, 100.0));
  auto* threshold = cmd->add_option("--threshold", o->threshold,
                                    "Diffusion: accept every position whose confidence exceeds this")
                        ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--factor", o->factor, "Diffusion: the factor rule instead of a threshold")
      ->check(CLI::PositiveNumber)
      ->excludes(threshold);
  cmd->add_option("--diffusion-cache", o->diffusion_cache, "Diffusion key-value cache: none, prefix or dual (default)")
      ->check(CLI::IsMember({"none", "prefix", "dual"}));
  cmd->add_option("--block-size", o->block_size, "Diffusion: positions per block (default: the model's)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--sub-block", o->sub_block_size, "Diffusion, dual cache: positions per sub-block (default: half a block)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--dense", o->dense, "Evaluate every grid point instead of coarse-to-fine");
  cmd->add_flag("--reference-mapping", o->reference_mapping, "Map vertices as the reference does (shrunk by 2^R/(2^R+1))");
  cmd->add_flag("--keep-floaters", o->keep_floaters, "Keep small disconnected pieces");
  cmd->add_option("--target-faces", o->target_faces, "Simplify to this many faces (0: max(10000, 10%), -1: off)");
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", o->json, "Print one JSON object with tokens, timings and mesh statistics");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  return [cmd, o]() -> int { return cmd->parsed() ? run_generate(*o) : -1; };
}

}  // namespace cubeforge::cli
