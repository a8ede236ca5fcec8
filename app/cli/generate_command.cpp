// `cubeforge-cli generate`: a prompt to a mesh file.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/decoding_arguments.h"
#include "app/cli/engine_options.h"
#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/cli/progress.h"
#include "inference/core/system_info.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/geometry/mesh_io.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/pipeline/generation_report.h"
#include "inference/planning/plan.h"
#include "inference/tensor/trace_file.h"

namespace cubeforge::cli {

namespace {

// A closed surface has at least 4 faces (a tetrahedron); simplification may
// still find no closed mesh that small, which generate_shape reports.
constexpr int64_t kMinTargetFaces = 4;

struct GenerateOptions {
  std::string model_dir, prompt, out;
  bool model_given = false;
  std::string seed_text = "0";
  float guidance = kModelGuidance;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool sample = false;
  bool sampling_knob_given = false;  // --temperature, --top-k or --top-p
  std::vector<float> bbox;
  int resolution = 8;
  std::string attention = "causal";
  bool no_kv_cache = false;
  std::string backend = "auto";
  bool no_cuda_graphs = false;
  DecodingArguments decoding;
  bool dense = false;
  int64_t latent_top_k = 0;  // 0: every grid point attends to every latent
  bool reference_mapping = false;
  bool keep_floaters = false;
  int64_t target_faces = 0;
  int threads = 0;
  bool json = false;
  bool quiet = false;
  std::string trace;    // write the named intermediates here
  int trace_steps = 2;  // decode steps in the trace
  bool force = false;
  EngineFlags engine;
};

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
  static_cast<DecodeOptions&>(generation) = request.decode();
  DecodingOptions sequential_decoding = request.decoding;
  sequential_decoding.mode = DecodingMode::kSequential;
  // The comparison runs on the CPU, where every decoding strategy runs.
  const std::shared_ptr<TokenBackend> cpu = make_cpu_token_backend(model.gpt());
  std::vector<double> times[2];
  SequentialComparison comparison;
  for (int round = 0; round < 3; ++round)
    for (int parallel = 0; parallel < 2; ++parallel) {
      const auto start = std::chrono::steady_clock::now();
      CUBEFORGE_ASSIGN_OR_RETURN(DecodedTokens decoded,
                                 decode_tokens(*cpu, cond, uncond, model.shape_tokens(), generation,
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

// The request the flags ask for, before any model is loaded. A sampling knob
// given on the command line asks for sampling (`--sample` is implied).
Result<GenerationRequest> request_from_flags(const GenerateOptions& o, TraceRecorder* trace) {
  GenerationRequest request;
  request.prompt = o.prompt;
  request.seed = std::stoull(o.seed_text);  // checked by seed_number()
  request.guidance_scale = o.guidance;
  request.sampling.greedy = !(o.sample || o.sampling_knob_given);
  request.sampling.temperature = o.temperature;
  request.sampling.top_k = o.top_k;
  request.sampling.top_p = o.top_p;
  if (!o.bbox.empty()) request.bbox = std::array<float, 3>{o.bbox[0], o.bbox[1], o.bbox[2]};
  request.attention = parse_attention_mode(o.attention).value_or(AttentionMode::kCausal);
  request.use_kv_cache = !o.no_kv_cache;
  CUBEFORGE_ASSIGN_OR_RETURN(request.kv_cache, kv_cache_choice(o.engine));
  request.cuda_graphs = !o.no_cuda_graphs;
  CUBEFORGE_ASSIGN_OR_RETURN(request.backend, parse_backend_choice(o.backend));
  request.decoding = o.decoding.options();
  request.resolution = o.resolution;
  request.coarse_to_fine = !o.dense;
  request.latent_top_k = o.latent_top_k;
  request.vertex_mapping = o.reference_mapping ? VertexMapping::kReference : VertexMapping::kCellSize;
  request.remove_floaters = !o.keep_floaters;
  request.target_faces = o.target_faces;
  if (!o.trace.empty()) {
    request.trace = trace;
    request.trace_decode_steps = o.trace_steps;
  }
  // What can be said without the model, said before loading it.
  CUBEFORGE_TRY(check_decode_options(request.decode()));
  CUBEFORGE_TRY(check_meshing_options(request.meshing()));
  CUBEFORGE_TRY(check_parallel_decoding(request.decode(), request.decoding, request.trace != nullptr));
  return request;
}

int run_generate(GenerateOptions o) {
  if (o.out.empty()) o.out = "cubeforge.glb";
  auto format = mesh_file_format_from_path(o.out);
  if (!format.ok()) {
    print_error("generate", format.error());
    return 2;
  }
  TraceRecorder trace;
  auto asked = request_from_flags(o, &trace);
  if (!asked.ok()) {
    print_error("generate", asked.error());
    return exit_status_of(asked.error());
  }
  const auto folder = model_folder_or_report(o.model_dir, o.model_given, "generate");
  if (!folder) return 2;
  if (!output_writable(o.out, o.force, "generate")) return 1;
  if (!o.trace.empty() && !output_writable(o.trace, o.force, "generate")) return 1;
  auto weights = weight_options(o.engine.weights, o.engine.q4_group);
  if (!weights.ok()) {
    print_error("generate", weights.error());
    return 2;
  }
  share_one_malloc_arena_under_address_limit();
  if (!set_threads_within_address_space(o.threads, *folder, o.resolution, !o.dense, "generate")) return 1;
  install_interrupt_handler();
  auto model = load_model_or_report(*folder, "generate", *weights);
  if (!model) return 1;
  // Checked again now that the model's files are known inputs: neither output may replace one.
  if (!output_writable(o.out, o.force, "generate")) return 1;
  if (!o.trace.empty() && !output_writable(o.trace, o.force, "generate")) return 1;
  auto planned = plan_generation(*model, std::move(*asked));
  if (!planned.ok()) {
    print_error("generate", planned.error());
    return exit_status_of(planned.error());
  }
  const GenerationRequest& request = planned->request;
  const uint64_t seed = request.seed;
  if (!o.json && !o.quiet) std::fprintf(stderr, "backend: %s\n", planned->backend_reason.c_str());

  if (model->tokenizer().encode(o.prompt).truncated && !o.json)
    std::fprintf(stderr, "generate: note: the prompt is longer than CLIP's 75 tokens; the rest is ignored\n");

  ProgressLine progress(!o.quiet && !o.json && isatty(STDERR_FILENO));
  auto on_event = [&](const GenerationEvent& e) {
    progress.on_event(e);
    if (e.kind == GenerationEvent::Kind::kStageStarted && e.stage == Stage::kText) pause_if_testing("text");
    if (e.kind == GenerationEvent::Kind::kStageStarted && e.stage == Stage::kMeshing) pause_if_testing("meshing");
    if (e.kind == GenerationEvent::Kind::kStageStarted && e.stage == Stage::kCleanup) pause_if_testing("cleanup");
  };
  auto result = generate_shape(*model, request, on_event, &interrupted());
  progress.finish();
  const std::string out_shown = readable_untrusted(o.out);
  auto report_cancel = [&] {
    auto kind = file_kind(o.out);
    std::fprintf(stderr, "generate: cancelled (%s); '%s' %s\n", cancelling_signal_name(), out_shown.c_str(),
                 kind.ok() && *kind == FileKind::kRegular ? "was left as it was" : "was not written");
    return cancelled_exit_code();
  };
  // Written whatever the outcome but a cancel: a trace is most wanted when a run goes wrong.
  const bool cancelled = !result.ok() && result.error().code == ErrorCode::kCancelled;
  if (!o.trace.empty() && !cancelled) {
    WriteOptions trace_write = output_write_options(o.force);
    trace_write.cancel = &interrupted();
    Status written = trace.write(o.trace, {{"prompt", o.prompt}, {"model", model->folder().string()}}, trace_write);
    if (!written.ok()) {
      if (written.error().code == ErrorCode::kCancelled) return report_cancel();
      print_error("generate", written.error());
      return 1;
    }
    if (!o.json)
      std::fprintf(stderr, "generate: wrote the trace %s (%zu tensors)\n", readable_untrusted(o.trace).c_str(),
                   trace.tensors().size());
  }
  if (!result.ok()) {
    if (result.error().code == ErrorCode::kCancelled) return report_cancel();
    print_error("generate", result.error());
    return 1;
  }
  if (!result->stats.has_surface) {
    std::fprintf(stderr, "generate: the decoded shape has no surface at resolution %d; try another seed or prompt\n",
                 o.resolution);
    return 1;
  }
  pause_if_testing("export");
  if (interrupted().load()) return report_cancel();
  WriteOptions write = output_write_options(o.force);
  write.cancel = &interrupted();
  write.before_rename = [] { pause_if_testing("rename"); };
  Status saved = export_mesh(result->mesh, o.out, *format, write);
  if (!saved.ok()) {
    if (saved.error().code == ErrorCode::kCancelled) return report_cancel();
    print_error("generate", saved.error());
    return 1;
  }
  std::optional<SequentialComparison> sequential;
  if (request.decoding.mode == DecodingMode::kJacobi) {
    auto compared = compare_with_sequential(*model, request, result->tokens);
    if (!compared.ok()) {
      print_error("generate", compared.error());
      return 1;
    }
    sequential = *compared;
  }
  // Watertightness is what 3D printing and boolean tools need; say it for the mesh as written.
  const MeshTopology topology = analyze_topology(result->mesh);
  if (o.json) {
    // The result as every reporter gives it (generation_report.h), and what only this run knows.
    nlohmann::json report = to_json(*result, request);
    report["prompt"] = escape_untrusted(o.prompt);
    report["seed"] = seed;
    report["model"] = escape_untrusted(model->folder().string());
    report["backend"] = {{"kind", backend_kind_name(request.token_backend->kind())},
                         {"description", request.token_backend->description()},
                         {"reason", planned->backend_reason}};
    report["weights"] = o.engine.weights;
    nlohmann::json& mesh = report["mesh"];
    mesh["closed"] = topology.closed_and_oriented();
    mesh["boundary_edges"] = topology.boundary_edges;
    mesh["non_manifold_edges"] = topology.non_manifold_edges;
    mesh["components"] = topology.components;
    report["output"] = escape_untrusted(o.out);
    nlohmann::json& decoding = report["decoding"];
    if (sequential) {
      decoding["sequential_token_ms"] = sequential->sequential_ms;
      decoding["parallel_token_ms"] = sequential->parallel_ms;
      decoding["speedup_over_sequential"] = sequential->sequential_ms / std::max(1e-9, sequential->parallel_ms);
      decoding["tokens_equal_sequential"] = sequential->tokens_equal;
    }
    std::cout << json_line(report) << std::endl;
  } else {
    print_timing_table(*result, stdout);
    if (sequential)
      std::printf(
          "exact parallel decoding: %.1f ms for the tokens against %.1f ms sequentially (%.2fx, medians of "
          "3 alternating), %s\n",
          sequential->parallel_ms, sequential->sequential_ms,
          sequential->sequential_ms / std::max(1e-9, sequential->parallel_ms),
          sequential->tokens_equal ? "the same tokens" : "DIFFERENT TOKENS");
    std::printf("wrote %s (%lld faces, %s)\n", out_shown.c_str(), static_cast<long long>(topology.faces),
                topology.closed_and_oriented() ? "watertight" : "not watertight");
  }
  return 0;
}

}  // namespace

Action add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Turn a prompt into a mesh file");
  cmd->formatter(research_help_formatter());
  cmd->footer(
      "Research options (KV cache forms, budget and rank, attention mode, parallel decoding's knobs, latent "
      "selection, dense grids, traces): --help-all");
  CLI::Option* model = cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--prompt,-p", o->prompt, "What to make")->required();
  cmd->add_option("--out,-o", o->out, "Output mesh: .glb, .obj, .stl or .ply (default cubeforge.glb)");
  cmd->add_flag("--force", o->force, "Replace the output file even if it is read-only");
  cmd->add_option("--seed", o->seed_text, "Seed for sampling (0 to 2^64 - 1)")->check(seed_number());
  cmd->add_option("--guidance", o->guidance,
                  "Classifier-free guidance scale (0: off; default: the model's, from its config.yaml, else 3, "
                  "the reference's)")
      ->check(number_in(0.0, kMaxGuidance, false, "0 turns guidance off; 3 is the reference's"));
  cmd->add_flag("--sample", o->sample, "Sample instead of greedy decoding");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature")
      ->check(number_in(0.0, std::numeric_limits<double>::max(), true,
                        "1 samples the model's distribution, lower is closer to greedy"));
  cmd->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0: off)")
      ->check(whole_number_in(0, std::numeric_limits<int>::max(), "0 turns it off"));
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling mass (1: off)")
      ->check(number_in(0.0, 1.0, true, "1 turns it off"));
  cmd->add_option("--bbox", o->bbox, "Bounding box size X Y Z (scaled so the largest side is 1.925)")
      ->expected(3)
      ->check(number_in(kMinBoundingBoxSide, kMaxBoundingBoxSide, false,
                        "a size in any unit: only the proportions matter"));
  cmd->add_option("--resolution", o->resolution, "Grid resolution: (2^R + 1)^3 points")
      ->check(whole_number_in(2, 10, "8 is the reference's"));
  in_research_group(
      cmd->add_option("--attention", o->attention, "causal (correct) or reference (the reference's KV-cache quirk)"),
      true)
      ->check(CLI::IsMember({"causal", "reference"}));
  in_research_group(cmd->add_flag("--no-kv-cache", o->no_kv_cache, "Recompute the whole sequence every step"), true);
  cmd->add_option("--backend", o->backend, "Where the GPT runs: auto (CUDA when a usable GPU is present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  in_research_group(cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs,
                                  "CUDA: launch each decode step's kernels instead of replaying a graph"),
                    true);
  add_decoding_arguments(cmd, o->decoding, /*research=*/true);
  in_research_group(cmd->add_flag("--dense", o->dense, "Evaluate every grid point instead of coarse-to-fine"), true);
  in_research_group(
      cmd->add_option("--latent-top-k", o->latent_top_k,
                      "Coarse-to-fine: each block of grid points attends to the K latents its parent cell weighs most "
                      "(0: every latent, exact)"),
      true)
      ->check(whole_number_in(0, 65536, "latents per block; 0 attends to every latent"));
  in_research_group(cmd->add_flag("--reference-mapping", o->reference_mapping,
                                  "Map vertices as the reference does (shrunk by 2^R/(2^R+1))"),
                    true);
  cmd->add_flag("--keep-floaters", o->keep_floaters, "Keep small disconnected pieces");
  cmd->add_option("--target-faces", o->target_faces, "Simplify to this many faces (0: max(10000, 10%), -1: off)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "0" || text == "-1") return {};
            if (whole_number_in(kMinTargetFaces, std::numeric_limits<int64_t>::max(), "")(text).empty()) return {};
            return "must be -1 (no simplification), 0 (automatic: max(10000, 10% of the faces)) or at least " +
                   std::to_string(kMinTargetFaces) + " faces, not '" + text + "'";
          },
          "", "target_faces"));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->check(whole_number_in(0, 1024, "0 uses every core"));
  cmd->add_flag("--json", o->json, "Print one JSON object with tokens, timings and mesh statistics");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress line");
  in_research_group(
      cmd->add_option(
          "--trace", o->trace,
          "Write the named intermediates (text encoder, prefill, first decode steps, shape decoder) to this "
          "safetensors file, for trace-diff"),
      true);
  in_research_group(cmd->add_option("--trace-steps", o->trace_steps, "Decode steps in the trace"), true)
      ->check(whole_number_in(0, 100000, "0 records no decode step"));
  add_engine_flags(cmd, o->engine, /*research=*/true);
  return [cmd, o, model]() -> int {
    if (!cmd->parsed()) return -1;
    o->model_given = model->count() > 0;
    o->sampling_knob_given = cmd->count("--temperature") + cmd->count("--top-k") + cmd->count("--top-p") > 0;
    return run_generate(*o);
  };
}

}  // namespace cubeforge::cli
