// `cubeforge-lab compare-decoding`: a decoding against sequential greedy
// decoding of an autoregressive model, prompt by prompt, in one run: model
// evaluations and tokens per evaluation, the time of the tokens and of the
// object, and how far the shape lands from the sequential one (the IoU of the
// two solids voxelised on one grid) and whether its mesh is watertight.
//
// The decoding runs on --model (a block-diffusion folder for --decoding
// diffusion); the sequential reference on --reference, by default --model
// itself when it is autoregressive and the built-in model otherwise (the one
// the built-in block-diffusion model was fine-tuned from). With
// --against-no-cache the reference is the same block diffusion recomputing
// every position, which is exact: how far the prefix and dual caches move
// the tokens and the shape. Each prompt is
// generated --rounds times by both, alternating; times are medians, shapes
// come from the last round (greedy decoding repeats itself).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/cli/decoding_arguments.h"
#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/cli/prompt_list.h"
#include "inference/core/system_info.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/pipeline/generation_report.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kCommand = "compare-decoding";

struct DecodingCompareOptions {
  std::string model_dir, reference_dir;
  bool model_given = false;
  std::vector<std::string> prompts;
  std::string prompts_file;
  DecodingArguments decoding;
  float guidance = 3.0f;
  int resolution = 6;
  int iou_resolution = 6;
  int rounds = 3;
  int threads = 0;
  bool json = false;
  bool against_no_cache = false;  // the reference is this block diffusion recomputing every position
};

struct PromptFigures {
  std::string prompt;
  DecodingStats stats;
  double token_ms = 0, object_ms = 0;                      // medians: prefill and decode, the whole object
  double reference_token_ms = 0, reference_object_ms = 0;  // the same for sequential decoding
  int reference_evaluations = 0;
  int tokens = 0, tokens_agreeing = 0;  // positions where both decodings chose the same code
  double iou = 0;
  bool watertight = false, reference_watertight = false;
};

bool watertight(const GenerationResult& r) {
  return r.stats.has_surface && !r.mesh.empty() && analyze_topology(r.mesh).closed_and_oriented();
}

Result<PromptFigures> measure_prompt(const CubeModel& model, const CubeModel& reference, const std::string& prompt,
                                     const DecodingCompareOptions& o) {
  GenerationRequest request;
  request.prompt = prompt;
  request.guidance_scale = o.guidance;
  request.resolution = o.resolution;
  request.decoding = o.decoding.options();
  GenerationRequest sequential = request;
  sequential.decoding = DecodingOptions{};
  if (o.against_no_cache) {
    sequential.decoding = request.decoding;
    sequential.decoding.diffusion.cache = DiffusionCache::kNone;
  }

  PromptFigures figures;
  figures.prompt = prompt;
  std::vector<double> token_ms, object_ms, reference_token_ms, reference_object_ms;
  std::optional<GenerationResult> ours, theirs;
  for (int round = 0; round < o.rounds; ++round) {
    CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult r, generate_shape(reference, sequential, {}, &interrupted()));
    reference_token_ms.push_back(r.timings.prefill_ms + r.timings.decode_ms);
    reference_object_ms.push_back(r.timings.total_ms());
    theirs = std::move(r);
    CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult g, generate_shape(model, request, {}, &interrupted()));
    token_ms.push_back(g.timings.prefill_ms + g.timings.decode_ms);
    object_ms.push_back(g.timings.total_ms());
    ours = std::move(g);
  }
  figures.stats = ours->decoding;
  figures.reference_evaluations = theirs->decoding.model_evaluations;
  figures.token_ms = median(token_ms);
  figures.object_ms = median(object_ms);
  figures.reference_token_ms = median(reference_token_ms);
  figures.reference_object_ms = median(reference_object_ms);
  figures.tokens = int(ours->tokens.size());
  for (size_t i = 0; i < ours->tokens.size() && i < theirs->tokens.size(); ++i)
    figures.tokens_agreeing += ours->tokens[i] == theirs->tokens[i];
  figures.watertight = watertight(*ours);
  figures.reference_watertight = watertight(*theirs);
  const bool ours_empty = ours->mesh.empty(), theirs_empty = theirs->mesh.empty();
  if (ours_empty || theirs_empty) {
    figures.iou = ours_empty && theirs_empty ? 1.0 : 0.0;
  } else {
    GridSpec grid;
    grid.resolution = o.iou_resolution;
    CUBEFORGE_ASSIGN_OR_RETURN(figures.iou, mesh_iou(ours->mesh, theirs->mesh, grid));
  }
  return figures;
}

std::optional<std::vector<std::string>> read_prompts(const DecodingCompareOptions& o) {
  std::vector<std::string> prompts = o.prompts;
  if (!o.prompts_file.empty()) {
    auto from_file = read_prompts_file(o.prompts_file);
    if (!from_file.ok()) {
      std::fprintf(stderr, "%s: %s\n", kCommand, from_file.error().to_string().c_str());
      return std::nullopt;
    }
    prompts.insert(prompts.end(), from_file->begin(), from_file->end());
  }
  if (prompts.empty()) {
    std::fprintf(stderr, "%s: no prompts; pass --prompt TEXT (repeatable) or --prompts FILE\n", kCommand);
    return std::nullopt;
  }
  return prompts;
}

int run_decoding_compare(const DecodingCompareOptions& o) {
  const auto prompts = read_prompts(o);
  if (!prompts) return 2;
  const auto folder = model_folder_or_report(o.model_dir, o.model_given, kCommand);
  if (!folder) return 2;
  share_one_malloc_arena_under_address_limit();
  if (!set_threads_within_address_space(o.threads, *folder, o.resolution, true, kCommand)) return 1;
  install_interrupt_handler();
  auto model = load_model_or_report(*folder, kCommand);
  if (!model) return 1;
  const bool block_diffusion = model->gpt().config().block_diffusion();
  if (o.against_no_cache && (!block_diffusion || !o.reference_dir.empty())) {
    std::fprintf(stderr, "%s: --against-no-cache compares block diffusion's caches on one block-diffusion model; "
                 "leave out --reference\n", kCommand);
    return 2;
  }
  std::filesystem::path reference_folder = o.reference_dir;
  if (reference_folder.empty()) reference_folder = block_diffusion && !o.against_no_cache ? default_model_folder() : *folder;
  std::optional<CubeModel> reference_loaded;
  if (reference_folder != *folder) {
    reference_loaded = load_model_or_report(reference_folder, kCommand);
    if (!reference_loaded) return 1;
  }
  const CubeModel& reference = reference_loaded ? *reference_loaded : *model;
  if (reference.gpt().config().block_diffusion() && !o.against_no_cache) {
    std::fprintf(stderr, "%s: the reference '%s' is a block-diffusion model; give an autoregressive one with "
                 "--reference\n", kCommand, readable_untrusted(reference_folder.string()).c_str());
    return 2;
  }
  if (reference.shape_tokens() != model->shape_tokens()) {
    std::fprintf(stderr, "%s: the reference decodes %d tokens per shape and the model %d; compare models of one "
                 "shape tokenizer\n", kCommand, reference.shape_tokens(), model->shape_tokens());
    return 2;
  }

  std::vector<PromptFigures> rows;
  for (const std::string& prompt : *prompts) {
    auto figures = measure_prompt(*model, reference, prompt, o);
    if (!figures.ok()) {
      if (figures.error().code == ErrorCode::kCancelled) return cancelled_exit_code();
      std::fprintf(stderr, "%s: '%s': %s\n", kCommand, readable_untrusted(prompt).c_str(),
                   figures.error().to_string().c_str());
      return 1;
    }
    rows.push_back(std::move(*figures));
  }

  const double n = double(rows.size());
  double evaluations = 0, reference_evaluations = 0, tokens = 0, agreeing = 0, token_ms = 0, reference_token_ms = 0,
         object_ms = 0, reference_object_ms = 0, iou = 0, watertight_count = 0, reference_watertight_count = 0;
  double iou_min = 1.0;
  for (const PromptFigures& r : rows) {
    evaluations += r.stats.model_evaluations;
    reference_evaluations += r.reference_evaluations;
    tokens += r.tokens;
    agreeing += r.tokens_agreeing;
    token_ms += r.token_ms;
    reference_token_ms += r.reference_token_ms;
    object_ms += r.object_ms;
    reference_object_ms += r.reference_object_ms;
    iou += r.iou;
    iou_min = std::min(iou_min, r.iou);
    watertight_count += r.watertight;
    reference_watertight_count += r.reference_watertight;
  }
  const DecodingOptions decoding = o.decoding.options();
  nlohmann::json settings = to_json(rows.front().stats, decoding);
  for (const char* per_run : {"model_evaluations", "tokens_per_evaluation", "tokens_per_step", "positions_per_step",
                              "guessed", "guesses_accepted"})
    settings.erase(per_run);
  nlohmann::json mean = {
      {"model_evaluations", evaluations / n},
      {"reference_model_evaluations", reference_evaluations / n},
      {"fewer_model_evaluations", evaluations > 0 ? reference_evaluations / evaluations : 0.0},
      {"tokens_per_evaluation", evaluations > 0 ? tokens / evaluations : 0.0},
      {"token_ms", token_ms / n},
      {"reference_token_ms", reference_token_ms / n},
      {"token_speedup", token_ms > 0 ? reference_token_ms / token_ms : 0.0},
      {"object_ms", object_ms / n},
      {"reference_object_ms", reference_object_ms / n},
      {"iou", iou / n},
      {"iou_min", iou_min},
      {"watertight_rate", watertight_count / n},
      {"reference_watertight_rate", reference_watertight_count / n},
      {"tokens_agreeing", tokens > 0 ? agreeing / tokens : 0.0},
  };
  if (o.json) {
    nlohmann::json report = {{"model", escape_untrusted(model->folder().string())},
                             {"reference", escape_untrusted(reference.folder().string())},
                             {"decoding", settings},
                             {"reference_decoding", o.against_no_cache ? "the same, no cache" : "sequential"},
                             {"guidance", o.guidance},
                             {"resolution", o.resolution},
                             {"iou_resolution", o.iou_resolution},
                             {"rounds", o.rounds},
                             {"threads", cpu::thread_count()},
                             {"mean", mean}};
    for (const PromptFigures& r : rows)
      report["prompts"].push_back({{"prompt", escape_untrusted(r.prompt)},
                                   {"model_evaluations", r.stats.model_evaluations},
                                   {"tokens_per_evaluation", r.stats.tokens_per_evaluation()},
                                   {"token_ms", r.token_ms},
                                   {"object_ms", r.object_ms},
                                   {"reference_model_evaluations", r.reference_evaluations},
                                   {"reference_token_ms", r.reference_token_ms},
                                   {"reference_object_ms", r.reference_object_ms},
                                   {"tokens_agreeing", r.tokens_agreeing},
                                   {"iou", r.iou},
                                   {"watertight", r.watertight},
                                   {"reference_watertight", r.reference_watertight}});
    std::cout << json_line(report) << std::endl;
    return 0;
  }
  std::printf("%s (%s) against %s of %s, %d round(s), resolution %d, IoU grid %d\n",
              readable_untrusted(model->folder().string()).c_str(), settings.dump().c_str(),
              o.against_no_cache ? "the same decoding without a cache" : "sequential decoding",
              readable_untrusted(reference.folder().string()).c_str(), o.rounds, o.resolution, o.iou_resolution);
  std::printf("%-32s %11s %10s %9s %9s %6s %10s %6s\n", "prompt", "evaluations", "tokens/ev", "token ms", "ref ms",
              "IoU", "watertight", "agree");
  for (const PromptFigures& r : rows)
    std::printf("%-32.32s %11d %10.2f %9.1f %9.1f %6.3f %10s %5.0f%%\n", readable_untrusted(r.prompt, 32).c_str(),
                r.stats.model_evaluations, r.stats.tokens_per_evaluation(), r.token_ms, r.reference_token_ms, r.iou,
                r.watertight ? "yes" : "no", 100.0 * r.tokens_agreeing / std::max(1, r.tokens));
  std::printf("mean: %.1f evaluations (%.2fx fewer), %.2f tokens per evaluation, tokens %.1f ms against %.1f ms "
              "(%.2fx), object %.0f ms against %.0f ms, IoU %.3f (min %.3f), watertight %.0f%% (reference %.0f%%)\n",
              double(mean["model_evaluations"]), double(mean["fewer_model_evaluations"]),
              double(mean["tokens_per_evaluation"]), double(mean["token_ms"]), double(mean["reference_token_ms"]),
              double(mean["token_speedup"]), double(mean["object_ms"]), double(mean["reference_object_ms"]),
              double(mean["iou"]), iou_min, 100.0 * watertight_count / n, 100.0 * reference_watertight_count / n);
  return 0;
}

}  // namespace

Action add_decoding_compare_command(CLI::App& app) {
  auto o = std::make_shared<DecodingCompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare-decoding",
      "Measure a decoding against sequential decoding: model evaluations, time, IoU and watertight meshes");
  CLI::Option* model = cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--reference", o->reference_dir,
                  "Autoregressive model decoded sequentially to compare with (default: --model when it is "
                  "autoregressive, else the built-in model)");
  cmd->add_flag("--against-no-cache", o->against_no_cache,
                "Compare block diffusion with the same rule recomputing every position (exact) instead of "
                "sequential decoding: how far a cache moves it");
  cmd->add_option("--prompt,-p", o->prompts, "A prompt (repeatable)");
  cmd->add_option("--prompts", o->prompts_file, "A file of prompts, one per line ('#' starts a comment)");
  add_decoding_arguments(cmd, o->decoding);
  cmd->add_option("--guidance", o->guidance, "Classifier-free guidance scale (0: off)")
      ->check(number_in(0.0, 100.0, false, "0 turns guidance off; 3 is the reference's"));
  cmd->add_option("--resolution", o->resolution, "Grid resolution of the meshes: (2^R + 1)^3 points")
      ->check(whole_number_in(2, 10, "8 is the reference's"));
  cmd->add_option("--iou-resolution", o->iou_resolution, "Grid the two solids are compared on: (2^R + 1)^3 points")
      ->check(whole_number_in(2, 9, "6 is (65)^3 points"));
  cmd->add_option("--rounds", o->rounds, "Generations of each prompt by each decoding, alternating (medians)")
      ->check(whole_number_in(1, 1000, "3 gives a median of three"));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->check(whole_number_in(0, 1024, "0 uses every core"));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  return [cmd, o, model]() -> int {
    if (!cmd->parsed()) return -1;
    o->model_given = model->count() > 0;
    return run_decoding_compare(*o);
  };
}

}  // namespace cubeforge::cli
