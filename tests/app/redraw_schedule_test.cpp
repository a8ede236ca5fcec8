// The desktop app's redraw schedule: an idle app draws nothing and sleeps
// until something happens; input draws at once and a few frames after;
// what moves by itself draws at its steady rate. Times are given, not
// measured, so nothing here depends on the machine's speed.
#include "app/desktop/core/redraw_schedule.h"

#include <gtest/gtest.h>

namespace cubeforge::app {
namespace {

// Draws the frames a new schedule owes at start, so a test begins idle.
RedrawSchedule settled() {
  RedrawSchedule schedule;
  while (schedule.should_draw({}, 0)) schedule.frame_drawn();
  return schedule;
}

TEST(RedrawSchedule, AnIdleAppDrawsNothingAndSleepsUntilAnEvent) {
  RedrawSchedule schedule;
  int start_frames = 0;
  while (schedule.should_draw({}, 0)) {
    schedule.frame_drawn();
    ++start_frames;
  }
  EXPECT_EQ(start_frames, RedrawSchedule::kSettleFrames) << "the panels settle at start";
  for (int wakeup = 0; wakeup < 100; ++wakeup) {
    EXPECT_EQ(schedule.wait_seconds({}, wakeup * 0.5), RedrawSchedule::kIdleWakeupSeconds);
    EXPECT_FALSE(schedule.should_draw({}, wakeup * 0.5)) << "wakeup " << wakeup;
  }
}

TEST(RedrawSchedule, InputDrawsAtOnceAndThePanelsSettleAfterIt) {
  RedrawSchedule schedule = settled();
  RedrawCauses input;
  input.input = true;
  EXPECT_EQ(schedule.wait_seconds(input, 0), 0.0) << "input waiting: no sleep";
  EXPECT_TRUE(schedule.should_draw(input, 0.0001)) << "input is not held back by any rate";
  schedule.frame_drawn();
  for (int settle = 0; settle < RedrawSchedule::kSettleFrames; ++settle) {
    EXPECT_EQ(schedule.wait_seconds({}, 0), 0.0);
    EXPECT_TRUE(schedule.should_draw({}, 0)) << settle;
    schedule.frame_drawn();
  }
  EXPECT_FALSE(schedule.should_draw({}, 10));
  // A script needs every frame to take its commands.
  RedrawCauses script;
  script.script = true;
  EXPECT_EQ(schedule.wait_seconds(script, 0), 0.0);
  EXPECT_TRUE(schedule.should_draw(script, 0));
}

TEST(RedrawSchedule, WhatMovesByItselfDrawsAtItsRate) {
  RedrawSchedule schedule = settled();
  RedrawCauses turning;
  turning.motion = true;
  const double motion = RedrawSchedule::kMotionPeriodSeconds;
  EXPECT_NEAR(schedule.wait_seconds(turning, motion / 4), motion * 3 / 4, 1e-12);
  EXPECT_FALSE(schedule.should_draw(turning, motion / 2));
  EXPECT_TRUE(schedule.should_draw(turning, motion));

  RedrawCauses running;
  running.job_running = true;
  const double progress = RedrawSchedule::kProgressPeriodSeconds;
  EXPECT_GT(progress, motion);
  EXPECT_NEAR(schedule.wait_seconds(running, 0), progress, 1e-12);
  EXPECT_FALSE(schedule.should_draw(running, motion));
  EXPECT_TRUE(schedule.should_draw(running, progress));
}

TEST(RedrawSchedule, WorkerNewsIsDrawnOnceAndNoFasterThanProgress) {
  RedrawSchedule schedule = settled();
  RedrawCauses news;
  news.worker_news = true;
  const double progress = RedrawSchedule::kProgressPeriodSeconds;
  // A message a millisecond after the last frame waits for the rate ...
  EXPECT_FALSE(schedule.should_draw(news, 0.001));
  // ... and is remembered at the next wakeups without news until it is drawn.
  EXPECT_NEAR(schedule.wait_seconds({}, 0.002), progress - 0.002, 1e-12);
  EXPECT_FALSE(schedule.should_draw({}, progress / 2));
  EXPECT_TRUE(schedule.should_draw({}, progress));
  schedule.frame_drawn();
  EXPECT_FALSE(schedule.should_draw({}, 10)) << "drawn news is not drawn again";
  EXPECT_EQ(schedule.wait_seconds({}, 10), RedrawSchedule::kIdleWakeupSeconds);
}

}  // namespace
}  // namespace cubeforge::app
