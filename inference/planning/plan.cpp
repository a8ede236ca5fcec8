// Planning a generation (plan.h).
#include "inference/planning/plan.h"

#include "inference/core/file_io.h"
#include "inference/decoding/decoding.h"
#include "inference/model/kv_bases.h"

namespace cubeforge {

namespace {

Result<std::shared_ptr<const LowRankKv>> read_kv_bases(const CubeModel& model, int rank) {
  const auto path = model.folder() / kKvBasesFile;
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind kind, file_kind(path));
  if (kind == FileKind::kMissing)
    return option_error(ErrorCode::kNotFound, OptionKey::kKvRank,
                        "a KV rank needs the model's low-rank bases, '" + path.string() +
                            "'; calibrate them for this model (calibrate-kv), or keep full rank (0)");
  auto bases = LowRankKv::load(path, model.config().gpt, rank);
  if (!bases.ok()) return option_error(bases.error().code, OptionKey::kKvRank, bases.error().message);
  return *bases;
}

}  // namespace

void PlanCache::use_model(const CubeModel& model) {
  if (model_ == &model) return;
  backends.clear();
  kv_bases.clear();
  model_ = &model;
}

Status can_run(const CubeModel& model, const GenerationRequest& request) {
  CUBEFORGE_TRY(check_generation_request(model, request));
  return choice_supports(request.backend, model.gpt(), request.backend_request());
}

Result<PlannedGeneration> plan_generation(const CubeModel& model, GenerationRequest request, PlanCache* cache) {
  PlanCache scratch;
  PlanCache& kept = cache ? *cache : scratch;
  kept.use_model(model);
  CUBEFORGE_TRY(check_generation_request(model, request));
  // The request says what runs: what it left to the model, the model decides here.
  request.decoding.diffusion = diffusion_options_for_model(request.decoding.diffusion, model.config().gpt);
  request.guidance_scale = guidance_for_model(request.guidance_scale, model.config().gpt);

  KvCacheOptions& kv = request.kv_cache;
  kv.low_rank = nullptr;
  if (request.use_kv_cache && kv.rank > 0) {
    auto found = kept.kv_bases.find(kv.rank);
    if (found == kept.kv_bases.end()) {
      CUBEFORGE_ASSIGN_OR_RETURN(auto bases, read_kv_bases(model, kv.rank));
      found = kept.kv_bases.emplace(kv.rank, std::move(bases)).first;
    }
    kv.low_rank = found->second;
  }

  // A backend is opened once per choice and model; what it runs is asked per
  // request, so auto falls back to the CPU for one request and keeps the GPU
  // for the next.
  const BackendRequest asked = request.backend_request();
  BackendSelection selection;
  auto opened = kept.backends.find(request.backend);
  if (opened != kept.backends.end() && opened->second.backend->supports(asked).ok()) {
    selection = opened->second;
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(selection, select_token_backend(request.backend, model.gpt(), asked));
    if (!selection.fallback_for_request && opened == kept.backends.end())
      kept.backends.emplace(request.backend, selection);
  }
  PlannedGeneration plan;
  plan.backend_reason = selection.reason;
  request.token_backend = selection.backend;
  plan.request = std::move(request);
  return plan;
}

}  // namespace cubeforge
