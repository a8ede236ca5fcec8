// The latency demo's arithmetic, apart from ImGui: the median and spread of a
// run's repeated measurements, the verdict on two runs (a speed-up only when
// the difference stands outside the noise of both), and the log scale its
// bars are drawn on, with labelled ticks.
//
// The machine the demo runs on is shared and noisy: one measurement per run
// shows noise as wins. Each run is repeated, and a difference is called a
// speed-up only when it stands outside the spread of both runs: every
// measurement of the candidate below every measurement of the baseline (the
// two ranges apart). Anything closer is "within noise": a rule on the
// medians alone lets the same work on both sides pass as 1.1x faster.
#pragma once

#include <string>
#include <vector>

namespace cubeforge::app {

// Runs of each variant the demo makes, and the fewest a verdict needs.
constexpr int kLatencyDemoRepeats = 3;
constexpr int kFewestRunsToCompare = 3;

// The median and the range (min to max) of repeated measurements; samples
// that are not finite numbers are left out (and not counted).
struct Spread {
  int samples = 0;
  double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> samples);

enum class Difference { kTooFewRuns, kWithinNoise, kFaster, kSlower };
struct Comparison {
  Difference difference = Difference::kTooFewRuns;
  double times = 1;  // baseline median / candidate median: > 1 is faster
};
// The candidate against the baseline, by the rule above.
Comparison compare_to_baseline(const Spread& baseline, const Spread& candidate);
// "3.2x faster", "1.4x slower", "within noise", "too few runs".
std::string describe(const Comparison& comparison);

// A logarithmic axis from `lowest` to `highest` (both > 0), for bars that
// start at `lowest`: the fastest run keeps a visible bar and the slowest
// fills the room, however many decades lie between them.
struct LogAxis {
  double lowest = 1, highest = 10;
  // Where `value` lies, from 0 (lowest) to 1 (highest), clamped.
  double position(double value) const;
  // Values to label: the powers of ten inside the axis, with its ends; 1-2-5
  // steps where fewer than three would be labelled.
  std::vector<double> ticks() const;
};
// The axis for values from `smallest` to `largest` (> 0): from the 1-2-5
// step at or below half the smallest (so that its bar spans at least a
// factor of two) to the 1-2-5 step at or above the largest.
LogAxis log_axis_for(double smallest, double largest);
// A tick's label in milliseconds or seconds: "0.5 ms", "20 ms", "2 s".
std::string tick_label(double ms);
// A measured time: "0.51 ms", "12 ms", "1.25 s".
std::string duration_text(double ms);
// A spread as the demo shows it: "0.51 ms (range 0.48 ms to 0.60 ms)"; one
// measurement alone is its value; none is "-".
std::string spread_text(const Spread& spread);

}  // namespace cubeforge::app
