// The reduction of a generation's event stream to what the statistics panel
// shows, fed a hand-written stream whose numbers are known.
#include <gtest/gtest.h>

#include "app/desktop/core/generation_progress.h"

namespace cubeforge::app {
namespace {

GenerationEvent stage(GenerationEvent::Kind kind, Stage s, double ms = 0) {
  GenerationEvent e;
  e.kind = kind;
  e.stage = s;
  e.stage_ms = ms;
  return e;
}

// Sequential decoding unless told: token i comes from evaluation i.
GenerationEvent token(int index, int id, int count, double ms, int step = -1) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kToken;
  e.decode_step = step >= 0 ? step : index;
  e.stage = e.decode_step == 0 ? Stage::kPrefill : Stage::kDecode;
  e.token_index = index;
  e.token = id;
  e.token_count = count;
  e.token_ms = ms;
  return e;
}

TEST(GenerationProgress, TokensFillTheirSlotsAndLatenciesFollowTheDecodeSteps) {
  GenerationProgress p;
  p.apply(stage(GenerationEvent::Kind::kStageStarted, Stage::kText), 0);
  EXPECT_EQ(p.current_stage(), AppStage::kText);
  p.apply(stage(GenerationEvent::Kind::kStageFinished, Stage::kText, 12.5), 12.5);
  EXPECT_FALSE(p.current_stage().has_value());
  p.apply(stage(GenerationEvent::Kind::kStageStarted, Stage::kPrefill), 12.5);
  EXPECT_EQ(p.token_count(), 0);
  EXPECT_FALSE(p.time_to_first_token_ms().has_value());

  p.apply(token(0, 17, 5, 30.0), 43.0);
  ASSERT_EQ(p.token_count(), 5);
  EXPECT_EQ(p.tokens_done(), 1);
  EXPECT_EQ(p.token_slots(), (std::vector<int>{17, -1, -1, -1, -1}));
  ASSERT_TRUE(p.time_to_first_token_ms().has_value());
  EXPECT_DOUBLE_EQ(*p.time_to_first_token_ms(), 43.0);
  EXPECT_TRUE(p.tpot_ms().empty());  // the first token is the prefill's

  p.apply(token(1, 3, 5, 10.0), 53.0);
  p.apply(token(2, 0, 5, 20.0), 73.0);
  EXPECT_EQ(p.tokens_done(), 3);
  EXPECT_EQ(p.tokens_so_far(), (std::vector<int>{17, 3, 0}));
  ASSERT_EQ(p.tpot_ms().size(), 2u);
  EXPECT_FLOAT_EQ(p.tpot_ms()[1], 20.f);
  EXPECT_FLOAT_EQ(p.tokens_per_second()[0], 100.f);
  EXPECT_FLOAT_EQ(p.tokens_per_second()[1], 50.f);
  EXPECT_DOUBLE_EQ(p.mean_tpot_ms(), 15.0);
  EXPECT_DOUBLE_EQ(*p.time_to_first_token_ms(), 43.0);  // later tokens do not move it
  EXPECT_DOUBLE_EQ(*p.stage_ms()[int(AppStage::kText)], 12.5);
  EXPECT_EQ(p.token_steps(), (std::vector<int>{0, 1, 2, -1, -1}));
}

// Parallel decoding: one evaluation fills several slots, block diffusion out
// of order; the slots keep the evaluation that chose them, the first
// evaluation's tokens all count as the first token's time, and every later
// token is one decode latency.
TEST(GenerationProgress, SeveralSlotsFillInOneEvaluation) {
  GenerationProgress p;
  p.apply(token(2, 40, 6, 12.0, 0), 30.0);
  p.apply(token(0, 41, 6, 12.0, 0), 30.0);
  ASSERT_TRUE(p.time_to_first_token_ms().has_value());
  EXPECT_DOUBLE_EQ(*p.time_to_first_token_ms(), 30.0);
  EXPECT_TRUE(p.tpot_ms().empty());
  p.apply(token(1, 42, 6, 4.0, 1), 38.0);
  p.apply(token(3, 43, 6, 4.0, 1), 38.0);
  p.apply(token(5, 44, 6, 8.0, 2), 46.0);
  EXPECT_EQ(p.tokens_done(), 5);
  EXPECT_EQ(p.token_slots(), (std::vector<int>{41, 42, 40, 43, -1, 44}));
  EXPECT_EQ(p.token_steps(), (std::vector<int>{0, 1, 0, 1, -1, 2}));
  EXPECT_EQ(p.tokens_so_far(), (std::vector<int>{41, 42, 40, 43}));
  ASSERT_EQ(p.tpot_ms().size(), 3u);
  EXPECT_DOUBLE_EQ(p.mean_tpot_ms(), 16.0 / 3.0);
  EXPECT_DOUBLE_EQ(*p.time_to_first_token_ms(), 30.0);
}

TEST(GenerationProgress, OccupancyProgressAndTheUploadStage) {
  GenerationProgress p;
  EXPECT_EQ(p.occupancy_fraction(), 0.0);
  p.apply(stage(GenerationEvent::Kind::kStageStarted, Stage::kOccupancy), 100);
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kOccupancyProgress;
  e.stage = Stage::kOccupancy;
  e.points_done = 250;
  e.points_planned = 1000;
  p.apply(e, 110);
  EXPECT_DOUBLE_EQ(p.occupancy_fraction(), 0.25);
  EXPECT_EQ(p.current_stage(), AppStage::kOccupancy);
  p.apply(stage(GenerationEvent::Kind::kStageFinished, Stage::kOccupancy, 40), 140);
  EXPECT_DOUBLE_EQ(*p.stage_ms()[int(AppStage::kOccupancy)], 40.0);
  EXPECT_FALSE(p.stage_ms()[int(AppStage::kUpload)].has_value());
  p.set_upload_ms(2.5);
  EXPECT_DOUBLE_EQ(*p.stage_ms()[int(AppStage::kUpload)], 2.5);
  EXPECT_STREQ(app_stage_name(AppStage::kUpload), "upload");
  EXPECT_STREQ(app_stage_name(AppStage::kShapeDecode), "shape decode");
}

TEST(GenerationProgress, ResetStartsANewRunAndBadIndicesAreIgnored) {
  GenerationProgress p;
  p.apply(token(0, 5, 3, 1.0), 1.0);
  p.apply(token(7, 5, 3, 1.0), 2.0);  // outside the sequence
  EXPECT_EQ(p.tokens_done(), 1);
  p.apply(token(0, 6, 3, 1.0), 3.0);  // the same slot again does not count twice
  EXPECT_EQ(p.tokens_done(), 1);
  EXPECT_EQ(p.token_slots()[0], 6);
  p.reset();
  EXPECT_EQ(p.token_count(), 0);
  EXPECT_EQ(p.tokens_done(), 0);
  EXPECT_FALSE(p.time_to_first_token_ms().has_value());
  for (const auto& ms : p.stage_ms()) EXPECT_FALSE(ms.has_value());
}

// What a person waiting reads: the tokens, then each pass with the time left,
// and a bar that never goes back although occupancy levels restart.
TEST(GenerationProgress, StatusNamesEachPassWithTheTimeLeftAndTheBarOnlyMovesForward) {
  GenerationProgress p;
  EXPECT_EQ(p.status(0), "Reading the prompt");
  p.apply(token(0, 1, 4, 5.0), 10);
  p.apply(token(1, 2, 4, 5.0), 15);
  EXPECT_EQ(p.status(15), "Shape tokens: 2 of 4");
  const float at_half_tokens = p.fraction(15);
  p.apply(token(2, 3, 4, 5.0), 20);
  p.apply(token(3, 4, 4, 5.0), 25);
  const float tokens_done = p.fraction(25);
  EXPECT_GT(tokens_done, at_half_tokens);

  p.start_pass("coarse preview", 5, false, 40.0, 25);
  EXPECT_EQ(p.status(35), "Coarse preview at resolution 5: about 30 ms left");
  const float coarse = p.fraction(60);
  EXPECT_GT(coarse, tokens_done);
  EXPECT_LT(coarse, tokens_done + 0.1f);  // a preview pass is a small part of the way

  p.start_pass("refining", 8, true, 8000.0, 65);
  EXPECT_EQ(p.status(2065), "Refining at resolution 8: about 6.0 s left");
  // Occupancy levels restart their point counts; the bar does not follow them back.
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kOccupancyProgress;
  float last = p.fraction(2065);
  for (int level = 0; level < 3; ++level) {
    for (int64_t done : {100, 600, 900}) {
      e.points_done = done;
      e.points_planned = 1000 * (level + 1);
      p.apply(e, 2100 + level * 1000 + done);
      const float now = p.fraction(2100 + level * 1000 + done);
      EXPECT_GE(now, last);
      last = now;
    }
  }
  EXPECT_LT(last, 1.f);
  EXPECT_EQ(p.status(9000), "Refining at resolution 8: taking longer than estimated");
  EXPECT_LT(p.fraction(20000), 1.f);  // not there until it is done
  p.finish(RunOutcome::kDone, 9500);
  EXPECT_EQ(p.status(9500), "Done in 9.5 s");
  EXPECT_FLOAT_EQ(p.fraction(9500), 1.f);
}

TEST(GenerationProgress, ACancelledRunSaysWhereItStoppedAndLeavesNothingRunning) {
  GenerationProgress p;
  p.apply(stage(GenerationEvent::Kind::kStageStarted, Stage::kDecode), 5);
  p.apply(token(0, 1, 64, 5.0), 10);
  p.apply(token(1, 2, 64, 5.0), 15);
  ASSERT_GT(p.fraction(15), 0.f);
  p.finish(RunOutcome::kCancelled, 16);
  EXPECT_EQ(p.status(20), "Cancelled at token 2 of 64");
  EXPECT_FALSE(p.current_stage().has_value());
  EXPECT_EQ(p.stopped_stage(), AppStage::kDecode);
  EXPECT_FLOAT_EQ(p.fraction(5000), 0.f);  // no share left standing as if the run were stuck there

  GenerationProgress q;
  for (int i = 0; i < 3; ++i) q.apply(token(i, i, 3, 1.0), i);
  q.start_pass("refining", 8, true, std::nullopt, 10);
  q.apply(stage(GenerationEvent::Kind::kStageStarted, Stage::kOccupancy), 11);
  q.finish(RunOutcome::kCancelled, 50);
  EXPECT_EQ(q.status(60), "Cancelled while refining");
  EXPECT_EQ(q.stopped_stage(), AppStage::kOccupancy);
  EXPECT_FLOAT_EQ(q.fraction(60), 0.f);
}

}  // namespace
}  // namespace cubeforge::app
