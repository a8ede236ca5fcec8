// Reduction of generation events to panel state: see generation_progress.h.
#include "app/desktop/core/generation_progress.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
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
      if (event.token_count > 0 && static_cast<int>(token_slots_.size()) != event.token_count) {
        token_slots_.resize(event.token_count, -1);
        token_steps_.resize(event.token_count, -1);
      }
      if (event.token_index < 0 || event.token_index >= static_cast<int>(token_slots_.size())) break;
      if (token_slots_[event.token_index] < 0) ++tokens_done_;
      token_slots_[event.token_index] = event.token;
      token_steps_[event.token_index] = event.decode_step;
      if (event.decode_step == 0) {
        if (!time_to_first_token_ms_) time_to_first_token_ms_ = elapsed_ms;
      } else {
        // The first evaluation is the prefill; the per-output-token latency is the decode steps.
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

void GenerationProgress::start_pass(const std::string& name, int resolution, bool final_pass,
                                    std::optional<double> estimate_ms, double elapsed_ms) {
  fraction_at_pass_start_ = std::max(last_fraction_, fraction(elapsed_ms));
  pass_name_ = name;
  pass_resolution_ = resolution;
  final_pass_ = final_pass;
  pass_estimate_ms_ = estimate_ms;
  pass_started_ms_ = elapsed_ms;
  points_done_ = points_planned_ = 0;
}

void GenerationProgress::finish(RunOutcome outcome, double elapsed_ms) {
  outcome_ = outcome;
  finished_ms_ = elapsed_ms;
  if (outcome != RunOutcome::kDone) stopped_stage_ = current_stage_;
  current_stage_.reset();
}

namespace {

std::string seconds_text(double ms) {
  char text[32];
  if (ms < 1000) std::snprintf(text, sizeof text, "%.0f ms", ms);
  else if (ms < 10000) std::snprintf(text, sizeof text, "%.1f s", ms / 1000);
  else std::snprintf(text, sizeof text, "%.0f s", ms / 1000);
  return text;
}

}  // namespace

std::string GenerationProgress::status(double elapsed_ms) const {
  char line[160];
  const bool tokens_done = token_count() > 0 && tokens_done_ == token_count();
  switch (outcome_) {
    case RunOutcome::kDone:
      return "Done in " + seconds_text(finished_ms_);
    case RunOutcome::kFailed:
      return "Failed (see the Log); the previous shape stays";
    case RunOutcome::kCancelled:
      // What the view shows after it (the previous shape, or the run's
      // preview offered to keep) is the app's to say.
      if (!tokens_done && token_count() > 0) {
        std::snprintf(line, sizeof line, "Cancelled at token %d of %d", tokens_done_, token_count());
        return line;
      }
      return pass_name_.empty() ? std::string("Cancelled") : "Cancelled while " + pass_name_;
    case RunOutcome::kRunning:
      break;
  }
  if (!pass_name_.empty()) {
    std::snprintf(line, sizeof line, "%c%s at resolution %d", std::toupper(static_cast<unsigned char>(pass_name_[0])),
                  pass_name_.c_str() + 1, pass_resolution_);
    std::string text = line;
    if (pass_estimate_ms_) {
      const double left = *pass_estimate_ms_ - (elapsed_ms - pass_started_ms_);
      text += left > 0 ? ": about " + seconds_text(left) + " left" : ": taking longer than estimated";
    } else if (points_planned_ > 0) {
      std::snprintf(line, sizeof line, ": %.0f%% of this level's points", 100.0 * occupancy_fraction());
      text += line;
    }
    return text;
  }
  if (token_count() > 0) {
    std::snprintf(line, sizeof line, "Shape tokens: %d of %d", tokens_done_, token_count());
    return line;
  }
  return "Reading the prompt";
}

float GenerationProgress::fraction(double elapsed_ms) {
  // A stopped run has no progress to show: its share at the stop would read
  // as a run stuck there.
  if (outcome_ == RunOutcome::kCancelled || outcome_ == RunOutcome::kFailed) return 0.f;
  float f = last_fraction_;
  if (outcome_ == RunOutcome::kDone) {
    f = 1.f;
  } else if (outcome_ == RunOutcome::kRunning) {
    if (!pass_name_.empty()) {
      // Time against the estimate; without one, a slow approach that never arrives.
      const double in_pass = elapsed_ms - pass_started_ms_;
      const double share = pass_estimate_ms_ && *pass_estimate_ms_ > 0
                               ? std::min(0.97, in_pass / *pass_estimate_ms_)
                               : 1.0 - std::exp(-in_pass / 5000.0);
      const float room = (1.f - fraction_at_pass_start_) * (final_pass_ ? 1.f : 0.1f);
      f = fraction_at_pass_start_ + room * static_cast<float>(share);
    } else if (token_count() > 0) {
      // The tokens are the first fifth of the way: meshing at full resolution dominates.
      f = 0.2f * static_cast<float>(tokens_done_) / static_cast<float>(token_count());
    }
  }
  last_fraction_ = std::max(last_fraction_, f);
  return last_fraction_;
}

}  // namespace cubeforge::app
