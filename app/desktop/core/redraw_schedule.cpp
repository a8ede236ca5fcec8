// When to draw and how long to sleep (redraw_schedule.h).
#include "app/desktop/core/redraw_schedule.h"

#include <algorithm>

namespace cubeforge::app {

double RedrawSchedule::period_seconds(const RedrawCauses& causes, bool news_waiting) {
  if (causes.motion) return kMotionPeriodSeconds;
  if (causes.job_running || news_waiting) return kProgressPeriodSeconds;
  return 0;
}

bool RedrawSchedule::should_draw(const RedrawCauses& causes, double since_last_frame_seconds) {
  news_waiting_ |= causes.worker_news;
  if (causes.input) {
    settle_frames_left_ = kSettleFrames;
    return true;
  }
  if (settle_frames_left_ > 0) {
    --settle_frames_left_;
    return true;
  }
  if (causes.script) return true;
  const double period = period_seconds(causes, news_waiting_);
  return period > 0 && since_last_frame_seconds >= period;
}

double RedrawSchedule::wait_seconds(const RedrawCauses& causes, double since_last_frame_seconds) const {
  if (causes.input || causes.script || settle_frames_left_ > 0) return 0;
  const double period = period_seconds(causes, news_waiting_ || causes.worker_news);
  if (period > 0) return std::max(0.0, period - since_last_frame_seconds);
  return kIdleWakeupSeconds;
}

void RedrawSchedule::frame_drawn() { news_waiting_ = false; }

}  // namespace cubeforge::app
