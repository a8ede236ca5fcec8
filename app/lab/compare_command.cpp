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
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "app/lab/commands.h"
#include "app/cli/engine_options.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/cli/prompt_list.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/ops.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/backend/generate.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

struct CompareOptions {
  std::string model_dir;
  bool model_given = false;
  std::vector<std::string> prompts;
  std::string prompts_file;
  EngineFlagLists engine;
  float guidance = 3.0f;
  int resolution = 6;
  int iou_resolution = 6;
  int threads = 0;
  bool json = false;
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
  CUBEFORGE_ASSIGN_OR_RETURN(run.tokens, generate_tokens(model.gpt(), c.cond, c.uncond, model.shape_tokens(), options,
                                                         {}, &trace, forced));
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

int run_compare(const CompareOptions& o) {
  cpu::set_thread_count(o.threads);
  auto fail = [](const std::string& message, int code = 1) {
    std::fprintf(stderr, "compare: %s\n", escape_untrusted(message).c_str());
    return code;
  };
  auto prompts = prompt_list(o.prompts, o.prompts_file);
  if (!prompts.ok()) return fail(prompts.error().to_string(), 2);
  const std::vector<EngineFlags> variants = o.engine.combinations();
  // The exact model, and one more per weight format the options name.
  std::map<std::string, CubeModel> models;
  const auto folder = model_folder_or_report(o.model_dir, o.model_given, "compare");
  if (!folder) return 2;
  {
    auto model = load_model_or_report(*folder, "compare");
    if (!model) return 1;
    models.emplace("stored", std::move(*model));
  }
  const CubeModel& exact_model = models.at("stored");
  for (const EngineFlags& v : variants) {
    if (models.count(v.weights)) continue;
    auto weights = weight_options(v.weights, o.engine.q4_group);
    if (!weights.ok()) return fail(weights.error().to_string(), 2);
    auto model = load_model_or_report(exact_model.folder(), "compare", *weights);
    if (!model) return 1;
    models.emplace(v.weights, std::move(*model));
  }
  std::vector<KvCacheOptions> kv_options;
  for (const EngineFlags& v : variants) {
    auto kv = kv_cache_options(v.kv_cache, v.kv_budget, v.kv_rank, exact_model.folder(), exact_model.config().gpt);
    if (!kv.ok()) return fail(kv.error().to_string(), 2);
    kv_options.push_back(*kv);
  }
  GridSpec iou_grid;
  iou_grid.resolution = o.iou_resolution;

  struct Measured {
    std::vector<double> logit_error, agreement, first_divergence, iou;
  };
  std::vector<Measured> measured(variants.size());
  nlohmann::json captions = nlohmann::json::array();
  for (const std::string& prompt : *prompts) {
    auto exact_conditions = conditions_for(exact_model, prompt, o.guidance);
    if (!exact_conditions.ok()) return fail(exact_conditions.error().to_string());
    auto exact = run_tokens(exact_model, *exact_conditions, o.guidance, {});
    if (!exact.ok()) return fail(exact.error().to_string());
    auto exact_mesh = mesh_of(exact_model, exact->tokens, o.resolution);
    if (!exact_mesh.ok()) return fail(exact_mesh.error().to_string());
    nlohmann::json caption = {{"prompt", escape_untrusted(prompt)}, {"exact_faces", exact_mesh->face_count()}, {"variants", nlohmann::json::array()}};
    for (size_t i = 0; i < variants.size(); ++i) {
      const CubeModel& model = models.at(variants[i].weights);
      auto conditions = conditions_for(model, prompt, o.guidance);
      if (!conditions.ok()) return fail(conditions.error().to_string());
      auto forced = run_tokens(model, *conditions, o.guidance, kv_options[i], exact->tokens);
      if (!forced.ok()) return fail(variants[i].label() + ": " + forced.error().to_string());
      auto greedy = run_tokens(model, *conditions, o.guidance, kv_options[i]);
      if (!greedy.ok()) return fail(variants[i].label() + ": " + greedy.error().to_string());
      const size_t count = exact->tokens.size();
      size_t equal = 0, first_divergence = count;
      for (size_t t = 0; t < count; ++t) {
        equal += greedy->tokens[t] == exact->tokens[t];
        if (greedy->tokens[t] != exact->tokens[t] && first_divergence == count) first_divergence = t;
      }
      auto mesh = mesh_of(model, greedy->tokens, o.resolution);
      if (!mesh.ok()) return fail(variants[i].label() + ": " + mesh.error().to_string());
      double iou = 0;
      if (mesh->empty() || exact_mesh->empty()) {
        iou = mesh->empty() && exact_mesh->empty() ? 1.0 : 0.0;
      } else {
        auto measured_iou = mesh_iou(*exact_mesh, *mesh, iou_grid);
        if (!measured_iou.ok()) return fail(variants[i].label() + ": IoU: " + measured_iou.error().to_string());
        iou = *measured_iou;
      }
      Measured& m = measured[i];
      m.logit_error.push_back(relative_error(forced->logits, exact->logits));
      m.agreement.push_back(double(equal) / double(count));
      m.first_divergence.push_back(double(first_divergence));
      m.iou.push_back(iou);
      caption["variants"].push_back({{"variant", variants[i].label()},
                                     {"logit_relative_error", m.logit_error.back()},
                                     {"first_divergence", first_divergence},
                                     {"token_agreement", m.agreement.back()},
                                     {"mesh_iou", iou}});
    }
    captions.push_back(caption);
  }

  nlohmann::json summary = nlohmann::json::array();
  for (size_t i = 0; i < variants.size(); ++i) {
    const Measured& m = measured[i];
    summary.push_back({{"weights", variants[i].weights},
                       {"kv_cache", variants[i].kv_cache},
                       {"kv_budget", variants[i].kv_budget},
                       {"kv_rank", variants[i].kv_rank},
                       {"decode_weight_bytes", models.at(variants[i].weights).gpt().decode_weight_bytes()},
                       {"logit_relative_error_mean", mean(m.logit_error)},
                       {"logit_relative_error_max", *std::max_element(m.logit_error.begin(), m.logit_error.end())},
                       {"first_divergence_mean", mean(m.first_divergence)},
                       {"first_divergence_min", *std::min_element(m.first_divergence.begin(), m.first_divergence.end())},
                       {"token_agreement_mean", mean(m.agreement)},
                       {"mesh_iou_mean", mean(m.iou)},
                       {"mesh_iou_min", *std::min_element(m.iou.begin(), m.iou.end())}});
  }
  if (o.json) {
    nlohmann::json report = {{"model", escape_untrusted(exact_model.folder().string())},
                             {"tokens", exact_model.shape_tokens()},
                             {"captions", prompts->size()},
                             {"resolution", o.resolution},
                             {"iou_resolution", o.iou_resolution},
                             {"variants", summary},
                             {"per_caption", captions}};
    std::cout << json_line(report) << std::endl;
    return 0;
  }
  std::printf("%s: %zu captions, %d tokens each, against stored weights and the exact cache\n",
              readable_untrusted(exact_model.folder().string()).c_str(), prompts->size(), exact_model.shape_tokens());
  std::printf("%-28s %12s %12s %10s %10s %9s %9s\n", "variant", "logit err", "(max)", "agreement", "first div",
              "IoU", "(min)");
  for (size_t i = 0; i < variants.size(); ++i) {
    const nlohmann::json& r = summary[i];
    std::printf("%-28s %12.3g %12.3g %10.3f %10.1f %9.3f %9.3f\n", variants[i].label().c_str(),
                r["logit_relative_error_mean"].get<double>(), r["logit_relative_error_max"].get<double>(),
                r["token_agreement_mean"].get<double>(), r["first_divergence_mean"].get<double>(),
                r["mesh_iou_mean"].get<double>(), r["mesh_iou_min"].get<double>());
  }
  return 0;
}

}  // namespace

Action add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Quality of weight formats and KV cache options against the exact run");
  CLI::Option* model = cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--prompt,-p", o->prompts, "A caption (repeatable)");
  cmd->add_option("--prompts", o->prompts_file, "A file of captions, one per line");
  cmd->add_option("--guidance", o->guidance, "Classifier-free guidance scale")
      ->check(number_in(0.0, 100.0, false, "0 turns guidance off"));
  cmd->add_option("--resolution", o->resolution, "Meshing grid: 2^r cells per axis")
      ->check(whole_number_in(2, 10, "8 is the reference's"));
  cmd->add_option("--iou-resolution", o->iou_resolution, "Grid the mesh IoU is measured on: 2^r cells per axis")
      ->check(whole_number_in(2, 9, "the grid's 2^r cells per axis"));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->check(whole_number_in(0, 1024, "0 uses every core"));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  add_engine_flag_lists(cmd, o->engine);
  return [cmd, o, model]() -> int {
    if (!cmd->parsed()) return -1;
    o->model_given = model->count() > 0;
    return run_compare(*o);
  };
}

}  // namespace cubeforge::cli
