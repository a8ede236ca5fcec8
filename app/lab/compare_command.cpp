// `cubeforge-lab compare`: what each weight format and KV cache option costs
// in output, against the exact run (stored weights, float32 cache, every
// position, full rank), over a set of captions.
//
// Per caption and option:
//   logit_relative_error  teacher forced: fed the exact run's tokens, the
//                         guided logits of every step against the exact
//                         run's, ‖a − b‖ / ‖b‖ over all steps and codes
//   first_divergence      greedy on its own: the first step whose token
//                         differs from the exact run's (the token count
//                         when none does)
//   token_agreement       the fraction of steps with the exact run's token
//   mesh_iou              the volumetric IoU of its mesh with the exact mesh
// Speed is bench's job; this measures quality only.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "app/cli/engine_options.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/backend/generate.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/pipeline/generation.h"
#include "inference/planning/plan.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kCompareCommand = "compare";

struct CompareOptions {
  LabOptions lab;
  EngineFlagLists engine;
  float guidance = 3.0f;
  int resolution = 6;
  int iou_resolution = 6;
};

// One generation: greedy tokens, the guided logits of every step, the mesh.
struct Run {
  std::vector<int> tokens;
  std::vector<float> logits;  // [T, codes]
  Mesh mesh;
};

Result<Mesh> mesh_of(const CubeModel& model, std::span<const int> tokens, int resolution) {
  MeshingOptions meshing;
  meshing.resolution = resolution;
  CUBEFORGE_ASSIGN_OR_RETURN(GenerationResult result, tokens_to_mesh(model, tokens, meshing));
  return std::move(result.mesh);
}

// The caption's conditions (both rows of guidance).
struct Conditions {
  std::vector<float> cond, uncond;
};
Result<Conditions> conditions_for(const CubeModel& model, const std::string& prompt, float guidance) {
  Conditions c;
  CUBEFORGE_ASSIGN_OR_RETURN(c.cond, encode_prompt(model, prompt, std::nullopt));
  if (guidance > 0.f) {
    CUBEFORGE_ASSIGN_OR_RETURN(c.uncond, encode_prompt(model, "", std::nullopt));
  }
  return c;
}

// Greedy on its own (logits of its own steps), or fed `forced` tokens.
Result<Run> run_tokens(const CubeModel& model, const Conditions& c, float guidance, const KvCacheOptions& kv,
                       std::span<const int> forced = {}) {
  TokenGenerationOptions options;
  options.guidance_scale = guidance;
  options.kv_cache = kv;
  TokenTrace trace;
  Run run;
  CUBEFORGE_ASSIGN_OR_RETURN(
      run.tokens, generate_tokens(model.gpt(), c.cond, c.uncond, model.shape_tokens(), options, {}, &trace, forced));
  run.logits = std::move(trace.combined_logits);
  return run;
}

double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / double(values.size());
}

// What the comparison runs: the exact model, one more per weight format the
// options name, and each variant's KV options as planning checks them (with
// the bases of its rank read from the model folder).
struct ComparePlan {
  std::vector<std::string> prompts;
  std::vector<EngineFlags> variants;
  std::map<std::string, CubeModel> models;  // by weight format; "stored" is the exact model
  std::vector<KvCacheOptions> kv_options;   // per variant
};

// The variant's KV options, planned on `model` as a generation's would be.
Result<KvCacheOptions> planned_kv_cache(const CubeModel& model, const EngineFlags& flags, PlanCache& cache) {
  GenerationRequest request;
  CUBEFORGE_ASSIGN_OR_RETURN(request.kv_cache, kv_cache_choice(flags));
  request.backend = BackendChoice::kCpu;
  CUBEFORGE_ASSIGN_OR_RETURN(PlannedGeneration planned, plan_generation(model, std::move(request), &cache));
  return planned.request.kv_cache;
}

// Exit status 0 with the plan filled, else the status to exit with (after saying why).
int plan_compare(const CompareOptions& o, ComparePlan& plan) {
  auto prompts = lab_prompts(o.lab);
  if (!prompts.ok()) {
    print_error(kCompareCommand, prompts.error());
    return 2;
  }
  plan.prompts = std::move(*prompts);
  plan.variants = o.engine.combinations();
  const auto folder = lab_model_folder(o.lab, kCompareCommand);
  if (!folder) return 2;
  std::vector<std::string> formats = {"stored"};
  formats.insert(formats.end(), o.engine.weights.begin(), o.engine.weights.end());
  for (const std::string& weights : formats) {
    if (plan.models.count(weights)) continue;
    auto format = weight_options(weights, o.engine.q4_group);
    if (!format.ok()) {
      print_error(kCompareCommand, format.error());
      return 2;
    }
    auto model = load_model_or_report(*folder, kCompareCommand, *format);
    if (!model) return 1;
    plan.models.emplace(weights, std::move(*model));
  }
  PlanCache cache;
  for (const EngineFlags& v : plan.variants) {
    auto kv = planned_kv_cache(plan.models.at(v.weights), v, cache);
    if (!kv.ok()) {
      print_error(kCompareCommand, kv.error());
      return exit_status_of(kv.error());
    }
    plan.kv_options.push_back(*kv);
  }
  return 0;
}

// One caption's figures per variant, and the caption's row of the report.
struct CaptionFigures {
  std::vector<double> logit_error, agreement, first_divergence, iou;  // per variant
  nlohmann::json row;
};

struct VariantQuality {
  double logit_error = 0, agreement = 0, first_divergence = 0, iou = 0;
};

Result<double> iou_with_exact(const Mesh& exact, const Mesh& mesh, int iou_resolution) {
  if (mesh.empty() || exact.empty()) return mesh.empty() && exact.empty() ? 1.0 : 0.0;
  GridSpec grid;
  grid.resolution = iou_resolution;
  return mesh_iou(exact, mesh, grid);
}

// `variant` against the exact run on one caption: teacher forced, then greedy on its own.
Result<VariantQuality> measure_variant(const CubeModel& model, const KvCacheOptions& kv, const Run& exact,
                                       const Mesh& exact_mesh, const std::string& prompt, const CompareOptions& o) {
  CUBEFORGE_ASSIGN_OR_RETURN(Conditions conditions, conditions_for(model, prompt, o.guidance));
  CUBEFORGE_ASSIGN_OR_RETURN(Run forced, run_tokens(model, conditions, o.guidance, kv, exact.tokens));
  CUBEFORGE_ASSIGN_OR_RETURN(Run greedy, run_tokens(model, conditions, o.guidance, kv));
  const size_t count = exact.tokens.size();
  size_t equal = 0, first_divergence = count;
  for (size_t t = 0; t < count; ++t) {
    equal += greedy.tokens[t] == exact.tokens[t];
    if (greedy.tokens[t] != exact.tokens[t] && first_divergence == count) first_divergence = t;
  }
  CUBEFORGE_ASSIGN_OR_RETURN(Mesh mesh, mesh_of(model, greedy.tokens, o.resolution));
  VariantQuality f;
  f.logit_error = relative_error(forced.logits, exact.logits);
  f.agreement = double(equal) / double(count);
  f.first_divergence = double(first_divergence);
  CUBEFORGE_ASSIGN_OR_RETURN(f.iou, iou_with_exact(exact_mesh, mesh, o.iou_resolution));
  return f;
}

Result<CaptionFigures> measure_caption(const ComparePlan& plan, const std::string& prompt, const CompareOptions& o) {
  const CubeModel& exact_model = plan.models.at("stored");
  CUBEFORGE_ASSIGN_OR_RETURN(Conditions exact_conditions, conditions_for(exact_model, prompt, o.guidance));
  CUBEFORGE_ASSIGN_OR_RETURN(Run exact, run_tokens(exact_model, exact_conditions, o.guidance, {}));
  CUBEFORGE_ASSIGN_OR_RETURN(Mesh exact_mesh, mesh_of(exact_model, exact.tokens, o.resolution));
  CaptionFigures caption;
  caption.row = {{"prompt", escape_untrusted(prompt)},
                 {"exact_faces", exact_mesh.face_count()},
                 {"variants", nlohmann::json::array()}};
  for (size_t i = 0; i < plan.variants.size(); ++i) {
    const EngineFlags& variant = plan.variants[i];
    auto f = measure_variant(plan.models.at(variant.weights), plan.kv_options[i], exact, exact_mesh, prompt, o);
    if (!f.ok()) return make_error(f.error().code, variant.label() + ": " + f.error().message);
    caption.logit_error.push_back(f->logit_error);
    caption.agreement.push_back(f->agreement);
    caption.first_divergence.push_back(f->first_divergence);
    caption.iou.push_back(f->iou);
    caption.row["variants"].push_back({{"variant", variant.label()},
                                       {"logit_relative_error", f->logit_error},
                                       {"first_divergence", size_t(f->first_divergence)},
                                       {"token_agreement", f->agreement},
                                       {"mesh_iou", f->iou}});
  }
  return caption;
}

// Per variant, over the captions.
nlohmann::json compare_summary(const ComparePlan& plan, const std::vector<CaptionFigures>& captions) {
  nlohmann::json summary = nlohmann::json::array();
  for (size_t i = 0; i < plan.variants.size(); ++i) {
    std::vector<double> logit_error, agreement, first_divergence, iou;
    for (const CaptionFigures& c : captions) {
      logit_error.push_back(c.logit_error[i]);
      agreement.push_back(c.agreement[i]);
      first_divergence.push_back(c.first_divergence[i]);
      iou.push_back(c.iou[i]);
    }
    const EngineFlags& v = plan.variants[i];
    summary.push_back({{"weights", v.weights},
                       {"kv_cache", v.kv_cache},
                       {"kv_budget", v.kv_budget},
                       {"kv_rank", v.kv_rank},
                       {"decode_weight_bytes", plan.models.at(v.weights).gpt().decode_weight_bytes()},
                       {"logit_relative_error_mean", mean(logit_error)},
                       {"logit_relative_error_max", *std::max_element(logit_error.begin(), logit_error.end())},
                       {"first_divergence_mean", mean(first_divergence)},
                       {"first_divergence_min", *std::min_element(first_divergence.begin(), first_divergence.end())},
                       {"token_agreement_mean", mean(agreement)},
                       {"mesh_iou_mean", mean(iou)},
                       {"mesh_iou_min", *std::min_element(iou.begin(), iou.end())}});
  }
  return summary;
}

void report_compare(const CompareOptions& o, const ComparePlan& plan, const std::vector<CaptionFigures>& captions) {
  const CubeModel& exact_model = plan.models.at("stored");
  const nlohmann::json summary = compare_summary(plan, captions);
  if (o.lab.json) {
    nlohmann::json per_caption = nlohmann::json::array();
    for (const CaptionFigures& c : captions) per_caption.push_back(c.row);
    print_lab_report(kCompareCommand, {{"model", escape_untrusted(exact_model.folder().string())},
                                       {"tokens", exact_model.shape_tokens()},
                                       {"captions", plan.prompts.size()},
                                       {"resolution", o.resolution},
                                       {"iou_resolution", o.iou_resolution},
                                       {"variants", summary},
                                       {"per_caption", per_caption}});
    return;
  }
  std::printf("%s: %zu captions, %d tokens each, against stored weights and the exact cache\n",
              readable_untrusted(exact_model.folder().string()).c_str(), plan.prompts.size(),
              exact_model.shape_tokens());
  std::printf("%-28s %12s %12s %10s %10s %9s %9s\n", "variant", "logit err", "(max)", "agreement", "first div", "IoU",
              "(min)");
  for (size_t i = 0; i < plan.variants.size(); ++i) {
    const nlohmann::json& r = summary[i];
    std::printf("%-28s %12.3g %12.3g %10.3f %10.1f %9.3f %9.3f\n", plan.variants[i].label().c_str(),
                r["logit_relative_error_mean"].get<double>(), r["logit_relative_error_max"].get<double>(),
                r["token_agreement_mean"].get<double>(), r["first_divergence_mean"].get<double>(),
                r["mesh_iou_mean"].get<double>(), r["mesh_iou_min"].get<double>());
  }
}

int run_compare(const CompareOptions& o) {
  apply_lab_threads(o.lab);
  ComparePlan plan;
  if (int status = plan_compare(o, plan); status != 0) return status;
  std::vector<CaptionFigures> captions;
  for (const std::string& prompt : plan.prompts) {
    auto caption = measure_caption(plan, prompt, o);
    if (!caption.ok()) {
      std::fprintf(stderr, "%s: %s\n", kCompareCommand, escape_untrusted(caption.error().to_string()).c_str());
      return 1;
    }
    captions.push_back(std::move(*caption));
  }
  report_compare(o, plan, captions);
  return 0;
}

}  // namespace

Action add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd =
      app.add_subcommand(kCompareCommand, "Quality of weight formats and KV cache options against the exact run");
  add_lab_options(cmd, o->lab, kAllLabOptions);
  cmd->add_option("--guidance", o->guidance, "Classifier-free guidance scale")
      ->check(number_in(0.0, 100.0, false, "0 turns guidance off"));
  cmd->add_option("--resolution", o->resolution, "Meshing grid: 2^r cells per axis")
      ->check(whole_number_in(2, 10, "8 is the reference's"));
  cmd->add_option("--iou-resolution", o->iou_resolution, "Grid the mesh IoU is measured on: 2^r cells per axis")
      ->check(whole_number_in(2, 9, "the grid's 2^r cells per axis"));
  add_engine_flag_lists(cmd, o->engine);
  return [cmd, o]() -> int { return cmd->parsed() ? run_compare(*o) : -1; };
}

}  // namespace cubeforge::cli
