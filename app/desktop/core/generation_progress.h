// What the live-statistics panels show, reduced from the generation's event
// stream: the token slots filled so far, per-token latency (TPOT) and rate
// series for the plots, time to first token, per-stage times and the
// occupancy progress; and, for a person waiting, one status line (which pass
// runs, with an estimate of the time left) and one bar that only moves
// forward across the whole run.
//
// A run's meshing comes in passes: a coarse one as soon as the tokens are
// done, then the requested resolution (start_pass). Occupancy progress is
// per coarse-to-fine level, so its fraction falls back as levels are added;
// the bar follows the time against the pass's estimate instead.
//
// Pure bookkeeping with no clock of its own: every event arrives with the
// wall time since the run started (stamped by the worker when it happened),
// so the reduction is deterministic and testable.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "inference/pipeline/generation.h"

namespace cubeforge::app {

// The pipeline's stages plus the app's own last step: the viewport upload.
enum class AppStage { kText, kPrefill, kDecode, kShapeDecode, kOccupancy, kMeshing, kCleanup, kUpload };
constexpr int kAppStageCount = 8;
const char* app_stage_name(AppStage stage);

enum class RunOutcome { kRunning, kDone, kCancelled, kFailed };

class GenerationProgress {
 public:
  // A new run; the token count becomes known from the first token event.
  void reset();
  void apply(const GenerationEvent& event, double elapsed_ms);
  void set_upload_ms(double ms);
  // A meshing pass begins (after the tokens); estimate_ms: its expected time,
  // if known. A pass before the final one moves the bar a tenth of the rest.
  void start_pass(const std::string& name, int resolution, bool final_pass, std::optional<double> estimate_ms,
                  double elapsed_ms);
  // The run ended; a cancelled or failed run keeps the stage where it stopped.
  void finish(RunOutcome outcome, double elapsed_ms);

  RunOutcome outcome() const { return outcome_; }
  // One line for a person: what runs now and about how long is left, or how it ended.
  std::string status(double elapsed_ms) const;
  // The whole run's progress in [0, 1]: while it runs, never smaller than the
  // last value returned; 1 once done; 0 once cancelled or failed (no stale share).
  float fraction(double elapsed_ms);
  // The stage that was running when the run was cancelled or failed.
  std::optional<AppStage> stopped_stage() const { return stopped_stage_; }

  // Slot i holds token i, or -1 while it has not arrived.
  const std::vector<int>& token_slots() const { return token_slots_; }
  // Slot i holds the model evaluation that chose token i, or -1: with
  // parallel decoding several slots share one, and block diffusion fills a
  // block out of order.
  const std::vector<int>& token_steps() const { return token_steps_; }
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
  std::vector<int> token_steps_;
  int tokens_done_ = 0;
  std::vector<float> tpot_ms_;
  std::vector<float> tokens_per_second_;
  std::optional<double> time_to_first_token_ms_;
  std::array<std::optional<double>, kAppStageCount> stage_ms_{};
  std::optional<AppStage> current_stage_;
  int64_t points_done_ = 0, points_planned_ = 0;
  // Passes and the outcome.
  std::string pass_name_;
  int pass_resolution_ = 0;
  bool final_pass_ = true;
  std::optional<double> pass_estimate_ms_;
  double pass_started_ms_ = 0;
  float fraction_at_pass_start_ = 0;
  RunOutcome outcome_ = RunOutcome::kRunning;
  std::optional<AppStage> stopped_stage_;
  double finished_ms_ = 0;
  float last_fraction_ = 0;
};

}  // namespace cubeforge::app
