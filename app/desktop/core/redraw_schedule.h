// When the desktop app draws a frame, and how long its event loop may sleep
// before the next one.
//
// An idle app draws nothing: it sleeps in the window system's event wait
// until a person does something, the window needs repainting, or the worker
// posts news (it wakes the loop with an empty event). Each frame that handles
// input is followed by a few more, because ImGui settles over frames (a hover
// highlight, a popup sized on its second frame, a click's effect). Things
// that move by themselves keep frames coming at a steady rate: the camera
// turning, a held key or button, a job's progress and elapsed time; the
// worker's news draws no faster than that rate either (a fast model sends a
// message per token). Input is never held back by the rate.
//
// Plain logic without a window or clock, so its decisions are tested alone;
// the main loop (desktop_app.cpp) feeds it what happened and the time since
// the last frame.
#pragma once

namespace cubeforge::app {

// What is going on at one wakeup of the event loop.
struct RedrawCauses {
  bool input = false;        // input or window events (resize, repaint, focus) not yet drawn
  bool worker_news = false;  // the worker's messages changed what the panels show
  bool motion = false;       // the view moves by itself, or a key or button is held
  bool job_running = false;  // a job runs: its progress bar and elapsed time change
  bool script = false;       // a script needs frames to take its next command
};

class RedrawSchedule {
 public:
  // Frames drawn after the last input, for ImGui to settle.
  static constexpr int kSettleFrames = 3;
  // The steady rates: the view in motion, and a running job's progress.
  static constexpr double kMotionPeriodSeconds = 1.0 / 60.0;
  static constexpr double kProgressPeriodSeconds = 1.0 / 20.0;
  // With nothing to draw the loop still wakes this often, so nothing the
  // window system did not announce can wait longer than this.
  static constexpr double kIdleWakeupSeconds = 0.5;

  // At a wakeup: whether to draw a frame now. Worker news not drawn now is
  // remembered until a frame is drawn.
  bool should_draw(const RedrawCauses& causes, double since_last_frame_seconds);
  // Before sleeping: how long the loop may wait for events (0: poll and go on).
  double wait_seconds(const RedrawCauses& causes, double since_last_frame_seconds) const;
  // After a frame was drawn.
  void frame_drawn();

 private:
  // The rate anything that moves by itself asks for (0: nothing does).
  static double period_seconds(const RedrawCauses& causes, bool news_waiting);
  int settle_frames_left_ = kSettleFrames;  // the first frames settle the panels too
  bool news_waiting_ = false;
};

}  // namespace cubeforge::app
