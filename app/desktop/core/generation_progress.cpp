// Reduction of generation events to panel state: see generation_progress.h.
#include "app/desktop/core/generation_progress.h"

#include <numeric>

namespace cubeforge::app {

const char* app_stage_name(AppStage stage) {
  if (stage == AppStage::kUpload) return "upload";
  return stage_name(static_cast<Stage>(stage));
}

void GenerationProgress::reset() { *this = GenerationProgress(); }

void GenerationProgress::apply(const GenerationEvent& event, double elapsed_ms) {
  switch (event.kind) {
    case GenerationEvent::Kind::kStageStarted:
      current_stage_ = static_cast<AppStage>(event.stage);
      break;
    case GenerationEvent::Kind::kStageFinished:
      stage_ms_[static_cast<int>(event.stage)] = event.stage_ms;
      if (current_stage_ == static_cast<AppStage>(event.stage)) current_stage_.reset();
      break;
    case GenerationEvent::Kind::kToken: {
      if (event.token_count > 0 && static_cast<int>(token_slots_.size()) != event.token_count)
        token_slots_.resize(event.token_count, -1);
      if (event.token_index < 0 || event.token_index >= static_cast<int>(token_slots_.size())) break;
      if (token_slots_[event.token_index] < 0) ++tokens_done_;
      token_slots_[event.token_index] = event.token;
      if (event.token_index == 0) {
        if (!time_to_first_token_ms_) time_to_first_token_ms_ = elapsed_ms;
      } else {
        // Token 0 comes out of the prefill; the per-output-token latency is the decode steps.
        tpot_ms_.push_back(static_cast<float>(event.token_ms));
        tokens_per_second_.push_back(event.token_ms > 0 ? static_cast<float>(1000.0 / event.token_ms) : 0.f);
      }
      break;
    }
    case GenerationEvent::Kind::kOccupancyProgress:
      points_done_ = event.points_done;
      points_planned_ = event.points_planned;
      break;
  }
}

void GenerationProgress::set_upload_ms(double ms) { stage_ms_[static_cast<int>(AppStage::kUpload)] = ms; }

double GenerationProgress::mean_tpot_ms() const {
  if (tpot_ms_.empty()) return 0.0;
  return std::accumulate(tpot_ms_.begin(), tpot_ms_.end(), 0.0) / tpot_ms_.size();
}

double GenerationProgress::occupancy_fraction() const {
  return points_planned_ > 0 ? static_cast<double>(points_done_) / points_planned_ : 0.0;
}

std::vector<int> GenerationProgress::tokens_so_far() const {
  std::vector<int> prefix;
  for (int token : token_slots_) {
    if (token < 0) break;
    prefix.push_back(token);
  }
  return prefix;
}

}  // namespace cubeforge::app
