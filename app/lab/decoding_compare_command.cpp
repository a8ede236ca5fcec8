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
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/decoding_arguments.h"
#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/core/system_info.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/pipeline/generation_report.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kCommand = "compare-decoding";

struct DecodingCompareOptions {
  LabOptions lab;
  std::string reference_dir;
  DecodingArguments decoding;
  float guidance = kModelGuidance;
  int resolution = 6;
  int iou_resolution = 6;
  int rounds = 3;
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

// The models the comparison runs: the decoding's, and the reference it is
// measured against (the same model when no other is needed).
struct DecodingComparePlan {
  std::vector<std::string> prompts;
  std::optional<CubeModel> model, reference_loaded;
  const CubeModel& reference() const { return reference_loaded ? *reference_loaded : *model; }
};

// The reference --reference names, else --model itself when it is
// autoregressive (or with --against-no-cache), else the built-in model.
std::filesystem::path reference_folder_for(const DecodingCompareOptions& o, const std::filesystem::path& folder,
                                           bool block_diffusion) {
  if (!o.reference_dir.empty()) return o.reference_dir;
  return block_diffusion && !o.against_no_cache ? default_model_folder() : folder;
}

// Exit status 0 with the plan filled, else the status to exit with (after saying why).
int plan_decoding_compare(const DecodingCompareOptions& o, DecodingComparePlan& plan) {
  auto prompts = lab_prompts(o.lab);
  if (!prompts.ok()) {
    print_error(kCommand, prompts.error());
    return 2;
  }
  plan.prompts = std::move(*prompts);
  const auto folder = lab_model_folder(o.lab, kCommand);
  if (!folder) return 2;
  share_one_malloc_arena_under_address_limit();
  if (!set_threads_within_address_space(o.lab.threads, *folder, o.resolution, true, kCommand)) return 1;
  install_interrupt_handler();
  plan.model = load_model_or_report(*folder, kCommand);
  if (!plan.model) return 1;
  const bool block_diffusion = plan.model->gpt().config().block_diffusion();
  if (o.against_no_cache && (!block_diffusion || !o.reference_dir.empty())) {
    std::fprintf(stderr,
                 "%s: --against-no-cache compares block diffusion's caches on one block-diffusion model; "
                 "leave out --reference\n",
                 kCommand);
    return 2;
  }
  const std::filesystem::path reference_folder = reference_folder_for(o, *folder, block_diffusion);
  if (reference_folder != *folder) {
    plan.reference_loaded = load_model_or_report(reference_folder, kCommand);
    if (!plan.reference_loaded) return 1;
  }
  const CubeModel& reference = plan.reference();
  if (reference.gpt().config().block_diffusion() && !o.against_no_cache) {
    std::fprintf(stderr,
                 "%s: the reference '%s' is a block-diffusion model; give an autoregressive one with "
                 "--reference\n",
                 kCommand, readable_untrusted(reference_folder.string()).c_str());
    return 2;
  }
  if (reference.shape_tokens() != plan.model->shape_tokens()) {
    std::fprintf(stderr,
                 "%s: the reference decodes %d tokens per shape and the model %d; compare models of one "
                 "shape tokenizer\n",
                 kCommand, reference.shape_tokens(), plan.model->shape_tokens());
    return 2;
  }
  return 0;
}

// The means over the prompts.
struct DecodingCompareMeans {
  double evaluations = 0, reference_evaluations = 0, tokens = 0, agreeing = 0, token_ms = 0, reference_token_ms = 0,
         object_ms = 0, reference_object_ms = 0, iou = 0, iou_min = 1.0, watertight = 0, reference_watertight = 0;
};

DecodingCompareMeans means_of(const std::vector<PromptFigures>& rows) {
  DecodingCompareMeans m;
  for (const PromptFigures& r : rows) {
    m.evaluations += r.stats.model_evaluations;
    m.reference_evaluations += r.reference_evaluations;
    m.tokens += r.tokens;
    m.agreeing += r.tokens_agreeing;
    m.token_ms += r.token_ms;
    m.reference_token_ms += r.reference_token_ms;
    m.object_ms += r.object_ms;
    m.reference_object_ms += r.reference_object_ms;
    m.iou += r.iou;
    m.iou_min = std::min(m.iou_min, r.iou);
    m.watertight += r.watertight;
    m.reference_watertight += r.reference_watertight;
  }
  return m;
}

nlohmann::json mean_json(const DecodingCompareMeans& m, double n) {
  return {
      {"model_evaluations", m.evaluations / n},
      {"reference_model_evaluations", m.reference_evaluations / n},
      {"fewer_model_evaluations", m.evaluations > 0 ? m.reference_evaluations / m.evaluations : 0.0},
      {"tokens_per_evaluation", m.evaluations > 0 ? m.tokens / m.evaluations : 0.0},
      {"token_ms", m.token_ms / n},
      {"reference_token_ms", m.reference_token_ms / n},
      {"token_speedup", m.token_ms > 0 ? m.reference_token_ms / m.token_ms : 0.0},
      {"object_ms", m.object_ms / n},
      {"reference_object_ms", m.reference_object_ms / n},
      {"iou", m.iou / n},
      {"iou_min", m.iou_min},
      {"watertight_rate", m.watertight / n},
      {"reference_watertight_rate", m.reference_watertight / n},
      {"tokens_agreeing", m.tokens > 0 ? m.agreeing / m.tokens : 0.0},
  };
}

nlohmann::json prompt_json(const PromptFigures& r) {
  return {{"prompt", escape_untrusted(r.prompt)},
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
          {"reference_watertight", r.reference_watertight}};
}

void report_decoding_compare(const DecodingCompareOptions& o, const DecodingComparePlan& plan,
                             const std::vector<PromptFigures>& rows) {
  const double n = double(rows.size());
  const DecodingCompareMeans means = means_of(rows);
  const nlohmann::json mean = mean_json(means, n);
  DecodingOptions decoding = o.decoding.options();
  decoding.diffusion = diffusion_options_for_model(decoding.diffusion, plan.model->config().gpt);
  nlohmann::json settings = to_json(rows.front().stats, decoding);
  for (const char* per_run : {"model_evaluations", "tokens_per_evaluation", "tokens_per_step", "positions_per_step",
                              "guessed", "guesses_accepted"})
    settings.erase(per_run);
  const std::string model_folder = plan.model->folder().string(), reference_folder = plan.reference().folder().string();
  if (o.lab.json) {
    nlohmann::json prompts = nlohmann::json::array();
    for (const PromptFigures& r : rows) prompts.push_back(prompt_json(r));
    print_lab_report(kCommand, {{"model", escape_untrusted(model_folder)},
                                {"reference", escape_untrusted(reference_folder)},
                                {"decoding", settings},
                                {"reference_decoding", o.against_no_cache ? "the same, no cache" : "sequential"},
                                {"guidance", guidance_for_model(o.guidance, plan.model->config().gpt)},
                                {"resolution", o.resolution},
                                {"iou_resolution", o.iou_resolution},
                                {"rounds", o.rounds},
                                {"mean", mean},
                                {"prompts", prompts}});
    return;
  }
  std::printf("%s (%s) against %s of %s, %d round(s), resolution %d, IoU grid %d\n",
              readable_untrusted(model_folder).c_str(), settings.dump().c_str(),
              o.against_no_cache ? "the same decoding without a cache" : "sequential decoding",
              readable_untrusted(reference_folder).c_str(), o.rounds, o.resolution, o.iou_resolution);
  std::printf("%-32s %11s %10s %9s %9s %6s %10s %6s\n", "prompt", "evaluations", "tokens/ev", "token ms", "ref ms",
              "IoU", "watertight", "agree");
  for (const PromptFigures& r : rows)
    std::printf("%-32.32s %11d %10.2f %9.1f %9.1f %6.3f %10s %5.0f%%\n", readable_untrusted(r.prompt, 32).c_str(),
                r.stats.model_evaluations, r.stats.tokens_per_evaluation(), r.token_ms, r.reference_token_ms, r.iou,
                r.watertight ? "yes" : "no", 100.0 * r.tokens_agreeing / std::max(1, r.tokens));
  std::printf(
      "mean: %.1f evaluations (%.2fx fewer), %.2f tokens per evaluation, tokens %.1f ms against %.1f ms "
      "(%.2fx), object %.0f ms against %.0f ms, IoU %.3f (min %.3f), watertight %.0f%% (reference %.0f%%)\n",
      double(mean["model_evaluations"]), double(mean["fewer_model_evaluations"]), double(mean["tokens_per_evaluation"]),
      double(mean["token_ms"]), double(mean["reference_token_ms"]), double(mean["token_speedup"]),
      double(mean["object_ms"]), double(mean["reference_object_ms"]), double(mean["iou"]), means.iou_min,
      100.0 * means.watertight / n, 100.0 * means.reference_watertight / n);
}

int run_decoding_compare(const DecodingCompareOptions& o) {
  DecodingComparePlan plan;
  if (int status = plan_decoding_compare(o, plan); status != 0) return status;
  std::vector<PromptFigures> rows;
  for (const std::string& prompt : plan.prompts) {
    auto figures = measure_prompt(*plan.model, plan.reference(), prompt, o);
    if (!figures.ok()) {
      if (figures.error().code == ErrorCode::kCancelled) return cancelled_exit_code();
      std::fprintf(stderr, "%s: '%s': %s\n", kCommand, readable_untrusted(prompt).c_str(),
                   figures.error().to_string().c_str());
      return 1;
    }
    rows.push_back(std::move(*figures));
  }
  report_decoding_compare(o, plan, rows);
  return 0;
}

}  // namespace

Action add_decoding_compare_command(CLI::App& app) {
  auto o = std::make_shared<DecodingCompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare-decoding",
      "Measure a decoding against sequential decoding: model evaluations, time, IoU and watertight meshes");
  add_lab_options(cmd, o->lab, kAllLabOptions);
  cmd->add_option("--reference", o->reference_dir,
                  "Autoregressive model decoded sequentially to compare with (default: --model when it is "
                  "autoregressive, else the built-in model)");
  cmd->add_flag("--against-no-cache", o->against_no_cache,
                "Compare block diffusion with the same rule recomputing every position (exact) instead of "
                "sequential decoding: how far a cache moves it");
  add_decoding_arguments(cmd, o->decoding);
  cmd->add_option("--guidance", o->guidance,
                  "Classifier-free guidance scale (0: off; default: the model's, from its config.yaml, else 3, "
                  "the reference's)")
      ->check(number_in(0.0, kMaxGuidance, false, "0 turns guidance off; 3 is the reference's"));
  cmd->add_option("--resolution", o->resolution, "Grid resolution of the meshes: (2^R + 1)^3 points")
      ->check(whole_number_in(2, 10, "8 is the reference's"));
  cmd->add_option("--iou-resolution", o->iou_resolution, "Grid the two solids are compared on: (2^R + 1)^3 points")
      ->check(whole_number_in(2, 9, "6 is (65)^3 points"));
  cmd->add_option("--rounds", o->rounds, "Generations of each prompt by each decoding, alternating (medians)")
      ->check(whole_number_in(1, 1000, "3 gives a median of three"));
  return [cmd, o]() -> int { return cmd->parsed() ? run_decoding_compare(*o) : -1; };
}

}  // namespace cubeforge::cli
