// What the live-statistics panels show, reduced from the generation's event
// stream: the token slots filled so far, per-token latency (TPOT) and rate
// series for the plots, time to first token, per-stage times and the
// occupancy progress.
//
// Pure bookkeeping with no clock of its own: every event arrives with the
// wall time since the run started (stamped by the worker when it happened),
// so the reduction is deterministic and testable.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "inference/pipeline/generation.h"

namespace cubeforge::app {

// The pipeline's stages plus the app's own last step: the viewport upload.
enum class AppStage { kText, kPrefill, kDecode, kShapeDecode, kOccupancy, kMeshing, kCleanup, kUpload };
constexpr int kAppStageCount = 8;
const char* app_stage_name(AppStage stage);

class GenerationProgress {
 public:
  // A new run; the token count becomes known from the first token event.
  void reset();
  void apply(const GenerationEvent& event, double elapsed_ms);
  void set_upload_ms(double ms);

  // Slot i holds token i, or -1 while it has not arrived.
  const std::vector<int>& token_slots() const { return token_slots_; }
  int tokens_done() const { return tokens_done_; }
  int token_count() const { return static_cast<int>(token_slots_.size()); }
  // Model time of each decode token after the first (ms) and its rate (1000/ms).
  const std::vector<float>& tpot_ms() const { return tpot_ms_; }
  const std::vector<float>& tokens_per_second() const { return tokens_per_second_; }
  // Wall time from the start of the run to the first token; empty until then.
  std::optional<double> time_to_first_token_ms() const { return time_to_first_token_ms_; }
  double mean_tpot_ms() const;
  // ms of each finished stage; empty while not finished.
  const std::array<std::optional<double>, kAppStageCount>& stage_ms() const { return stage_ms_; }
  std::optional<AppStage> current_stage() const { return current_stage_; }
  // Occupancy points done / planned, 0 before the stage.
  double occupancy_fraction() const;
  // The tokens so far, in order (only the filled prefix).
  std::vector<int> tokens_so_far() const;

 private:
  std::vector<int> token_slots_;
  int tokens_done_ = 0;
  std::vector<float> tpot_ms_;
  std::vector<float> tokens_per_second_;
  std::optional<double> time_to_first_token_ms_;
  std::array<std::optional<double>, kAppStageCount> stage_ms_{};
  std::optional<AppStage> current_stage_;
  int64_t points_done_ = 0, points_planned_ = 0;
};

}  // namespace cubeforge::app
