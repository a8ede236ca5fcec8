// The latency demo's statistics and log axis: see latency_statistics.h.
#include "app/desktop/core/latency_statistics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cubeforge::app {

namespace {

// Floating-point slack for "the same 1-2-5 step" (0.3 / 0.1 is 2.9999...).
constexpr double kSlack = 1e-9;

double power_of_ten_at_or_below(double x) { return std::pow(10.0, std::floor(std::log10(x) + kSlack)); }

double step_at_or_below(double x) {
  const double decade = power_of_ten_at_or_below(x);
  const double m = x / decade;
  return decade * (m >= 5 - kSlack ? 5 : m >= 2 - kSlack ? 2 : 1);
}

double step_at_or_above(double x) {
  const double decade = power_of_ten_at_or_below(x);
  const double m = x / decade;
  return decade * (m <= 1 + kSlack ? 1 : m <= 2 + kSlack ? 2 : m <= 5 + kSlack ? 5 : 10);
}

bool nearly_equal(double a, double b) { return std::abs(a - b) <= kSlack * std::max(std::abs(a), std::abs(b)); }

}  // namespace

Spread spread_of(std::vector<double> samples) {
  std::erase_if(samples, [](double v) { return !std::isfinite(v); });
  Spread s;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

Comparison compare_to_baseline(const Spread& baseline, const Spread& candidate) {
  Comparison c;
  if (baseline.samples < kFewestRunsToCompare || candidate.samples < kFewestRunsToCompare) return c;
  c.times = candidate.median > 0 ? baseline.median / candidate.median : 1.0;
  if (candidate.max < baseline.min) c.difference = Difference::kFaster;
  else if (candidate.min > baseline.max) c.difference = Difference::kSlower;
  else c.difference = Difference::kWithinNoise;
  return c;
}

std::string describe(const Comparison& comparison) {
  char text[48];
  switch (comparison.difference) {
    case Difference::kTooFewRuns:
      return "too few runs";
    case Difference::kWithinNoise:
      return "within noise";
    case Difference::kFaster:
      std::snprintf(text, sizeof text, "%.*fx faster", comparison.times >= 10 ? 0 : 1, comparison.times);
      return text;
    case Difference::kSlower:
      const double slower = comparison.times > 0 ? 1 / comparison.times : 0;
      std::snprintf(text, sizeof text, "%.*fx slower", slower >= 10 ? 0 : 1, slower);
      return text;
  }
  return "";
}

double LogAxis::position(double value) const {
  if (!(value > 0) || !(highest > lowest) || !(lowest > 0)) return value > 0 && value >= highest ? 1 : 0;
  return std::clamp(std::log(value / lowest) / std::log(highest / lowest), 0.0, 1.0);
}

std::vector<double> LogAxis::ticks() const {
  std::vector<double> out = {lowest, highest};
  for (double p = power_of_ten_at_or_below(lowest); p <= highest * (1 + kSlack); p *= 10)
    if (p >= lowest * (1 - kSlack)) out.push_back(p);
  auto tidy = [&out] {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end(), nearly_equal), out.end());
  };
  tidy();
  if (out.size() < 3) {
    for (double decade = power_of_ten_at_or_below(lowest); decade <= highest * (1 + kSlack); decade *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (decade * m >= lowest * (1 - kSlack) && decade * m <= highest * (1 + kSlack)) out.push_back(decade * m);
    tidy();
  }
  return out;
}

LogAxis log_axis_for(double smallest, double largest) {
  if (!(smallest > 0) || !std::isfinite(smallest)) smallest = 1;
  if (!(largest >= smallest) || !std::isfinite(largest)) largest = smallest;
  return {step_at_or_below(smallest / 2), step_at_or_above(largest)};
}

std::string tick_label(double ms) {
  char text[32];
  if (ms >= 1000) std::snprintf(text, sizeof text, "%g s", ms / 1000);
  else std::snprintf(text, sizeof text, "%g ms", ms);
  return text;
}

std::string duration_text(double ms) {
  char text[32];
  if (ms >= 1000) std::snprintf(text, sizeof text, "%.2f s", ms / 1000);
  else if (ms >= 10) std::snprintf(text, sizeof text, "%.0f ms", ms);
  else std::snprintf(text, sizeof text, "%.2f ms", ms);
  return text;
}

std::string spread_text(const Spread& spread) {
  if (spread.samples == 0) return "-";
  if (spread.samples == 1) return duration_text(spread.median);
  return duration_text(spread.median) + " (range " + duration_text(spread.min) + " to " + duration_text(spread.max) +
         ")";
}

}  // namespace cubeforge::app
