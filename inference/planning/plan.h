// From a front end's choices to a generation that runs: the one function the
// command line and the app both build their runs with.
//
// A front end fills a GenerationRequest's options from its own controls (the
// command line's flags, the app's settings) and hands it here. Planning checks
// every option against the others and against the model, reads the KV bases of
// the chosen rank from the model folder, and opens the backend that runs the
// GPT, asking each backend what it supports. A refusal is an Error naming the
// option at fault (Error::option), for the front end to word as its flag or
// its control.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "inference/pipeline/generation.h"
#include "inference/planning/select_backend.h"

namespace cubeforge {

// What planning opens and reads, kept across the generations of one model
// (the CUDA backend uploads the weights once; bases are read once a rank).
class PlanCache {
 public:
  // Forgets everything when `model` is not the one the cache was filled for.
  void use_model(const CubeModel& model);

  std::map<BackendChoice, BackendSelection> backends;
  std::map<int, std::shared_ptr<const LowRankKv>> kv_bases;

 private:
  const CubeModel* model_ = nullptr;
};

struct PlannedGeneration {
  GenerationRequest request;   // token_backend and the KV bases set
  std::string backend_reason;  // one line: which backend runs it and why
};

// Plans `request` on `model` (see above). `cache`, when given, keeps the
// opened backends and the bases for the next plan of the same model.
Result<PlannedGeneration> plan_generation(const CubeModel& model, GenerationRequest request,
                                          PlanCache* cache = nullptr);

// Whether `request` can run on `model` with its backend choice, answered
// without opening anything or reading the bases: what a control greys out,
// and why (Error::option names the option).
Status can_run(const CubeModel& model, const GenerationRequest& request);

}  // namespace cubeforge
