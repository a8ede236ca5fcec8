// The latency demo's statistics on hand-made measurements: median and
// spread, the verdict that calls a difference a speed-up only outside the
// noise of both runs, and the log axis that keeps the fastest bar visible.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "app/desktop/core/latency_statistics.h"

namespace cubeforge::app {
namespace {

TEST(LatencySpread, MedianAndRangeOfOddAndEvenCounts) {
  const Spread odd = spread_of({9.0, 1.0, 4.0});
  EXPECT_EQ(odd.samples, 3);
  EXPECT_DOUBLE_EQ(odd.median, 4.0);
  EXPECT_DOUBLE_EQ(odd.min, 1.0);
  EXPECT_DOUBLE_EQ(odd.max, 9.0);
  const Spread even = spread_of({4.0, 1.0, 9.0, 2.0});
  EXPECT_DOUBLE_EQ(even.median, 3.0);
  EXPECT_EQ(spread_of({}).samples, 0);
  // A measurement that is not a number is no measurement.
  const Spread with_nan = spread_of({2.0, std::numeric_limits<double>::quiet_NaN(), 6.0});
  EXPECT_EQ(with_nan.samples, 2);
  EXPECT_DOUBLE_EQ(with_nan.median, 4.0);
}

// The demo's old display: one run each, 10 ms against 8.3 ms, shown as 1.2x.
// Repeated, the two overlap: within noise.
TEST(LatencyVerdict, OverlappingRunsAreWithinNoise) {
  const Spread baseline = spread_of({10.0, 7.9, 12.0});
  const Spread candidate = spread_of({8.3, 11.0, 7.5});
  const Comparison c = compare_to_baseline(baseline, candidate);
  EXPECT_EQ(c.difference, Difference::kWithinNoise);
  EXPECT_EQ(describe(c), "within noise");
}

TEST(LatencyVerdict, ASpeedUpOutsideBothSpreads) {
  const Spread baseline = spread_of({100.0, 90.0, 120.0});
  const Spread candidate = spread_of({10.0, 9.0, 11.0});
  const Comparison c = compare_to_baseline(baseline, candidate);
  EXPECT_EQ(c.difference, Difference::kFaster);
  EXPECT_DOUBLE_EQ(c.times, 10.0);
  EXPECT_EQ(describe(c), "10x faster");
  const Comparison back = compare_to_baseline(candidate, baseline);
  EXPECT_EQ(back.difference, Difference::kSlower);
  EXPECT_EQ(describe(back), "10x slower");
}

// Both ranges must lie apart. As the demo measured them on a busy machine,
// the same work twice (exact parallel decoding at one token per evaluation
// against the KV cache): the candidate's median below the baseline's fastest
// run, the baseline's median above the candidate's slowest, and still noise.
TEST(LatencyVerdict, TheRangesOfBothMustLieApart) {
  const Spread baseline = spread_of({0.43, 0.46, 0.58});
  const Spread candidate = spread_of({0.25, 0.40, 0.455});
  EXPECT_EQ(compare_to_baseline(baseline, candidate).difference, Difference::kWithinNoise);
  EXPECT_EQ(compare_to_baseline(candidate, baseline).difference, Difference::kWithinNoise);
  // Touching ranges are not apart.
  EXPECT_EQ(compare_to_baseline(spread_of({5.0, 6.0, 7.0}), spread_of({4.0, 4.5, 5.0})).difference,
            Difference::kWithinNoise);
  EXPECT_EQ(compare_to_baseline(spread_of({5.0, 6.0, 7.0}), spread_of({4.0, 4.5, 4.9})).difference,
            Difference::kFaster);
  EXPECT_EQ(compare_to_baseline(spread_of({4.0, 4.5, 4.9}), spread_of({5.0, 6.0, 7.0})).difference,
            Difference::kSlower);
}

TEST(LatencyVerdict, FewerThanThreeRunsGetNoVerdict) {
  const Spread two = spread_of({1.0, 1.1});
  const Spread three = spread_of({100.0, 101.0, 102.0});
  EXPECT_EQ(compare_to_baseline(three, two).difference, Difference::kTooFewRuns);
  EXPECT_EQ(compare_to_baseline(two, three).difference, Difference::kTooFewRuns);
  EXPECT_EQ(describe(compare_to_baseline(three, two)), "too few runs");
}

TEST(LatencyVerdict, SmallFactorsKeepOneDecimal) {
  const Comparison c = compare_to_baseline(spread_of({30.0, 31.0, 32.0}), spread_of({20.0, 20.5, 21.0}));
  EXPECT_EQ(c.difference, Difference::kFaster);
  EXPECT_EQ(describe(c), "1.5x faster");
}

// The demo's old bars were linear: 0.05 ms beside 300 ms was under a pixel.
// On the log axis the fastest bar spans at least a factor of two of it.
TEST(LatencyLogAxis, TheFastestBarIsVisibleAndTheSlowestFillsTheRoom) {
  const double fastest = 0.05, slowest = 300.0;
  const LogAxis axis = log_axis_for(fastest, slowest);
  EXPECT_LE(axis.lowest, fastest / 2);
  EXPECT_GE(axis.highest, slowest);
  EXPECT_DOUBLE_EQ(axis.position(axis.lowest), 0.0);
  EXPECT_DOUBLE_EQ(axis.position(axis.highest), 1.0);
  const double share = axis.position(fastest);
  EXPECT_GE(share, std::log(2.0) / std::log(axis.highest / axis.lowest) - 1e-12);
  EXPECT_GT(share * 400, 10.0) << "a 400-pixel bar room shows the fastest run as under 10 pixels";
  // A linear bar for the same run, for contrast: under a tenth of a pixel.
  EXPECT_LT(fastest / slowest * 400, 0.1);
  EXPECT_GT(axis.position(slowest), 0.9);
  EXPECT_LT(axis.position(1.0), axis.position(2.0));
  EXPECT_DOUBLE_EQ(axis.position(axis.lowest / 10), 0.0) << "clamped";
  EXPECT_DOUBLE_EQ(axis.position(axis.highest * 10), 1.0) << "clamped";
}

TEST(LatencyLogAxis, EndsAreOneTwoFiveSteps) {
  const LogAxis axis = log_axis_for(0.3, 470.0);
  EXPECT_NEAR(axis.lowest, 0.1, 1e-12);  // half of 0.3 is 0.15; the step below is 0.1
  EXPECT_NEAR(axis.highest, 500.0, 1e-9);
  const LogAxis exact = log_axis_for(4.0, 1000.0);
  EXPECT_NEAR(exact.lowest, 2.0, 1e-12);
  EXPECT_NEAR(exact.highest, 1000.0, 1e-9);
  const LogAxis one = log_axis_for(7.0, 7.0);
  EXPECT_LT(one.lowest, one.highest);
  EXPECT_LT(one.position(7.0), 1.0 + 1e-12);
  EXPECT_GT(one.position(7.0), 0.0);
}

TEST(LatencyLogAxis, TicksArePowersOfTenWithTheEnds) {
  const LogAxis axis = log_axis_for(0.05, 300.0);  // 0.02 to 500
  const auto ticks = axis.ticks();
  const std::vector<double> expected = {0.02, 0.1, 1, 10, 100, 500};
  ASSERT_EQ(ticks.size(), expected.size());
  for (size_t i = 0; i < ticks.size(); ++i) EXPECT_NEAR(ticks[i], expected[i], expected[i] * 1e-9) << i;
  // Within one decade, 1-2-5 steps fill in.
  const auto narrow = log_axis_for(3.0, 4.0).ticks();  // 1 to 5
  ASSERT_GE(narrow.size(), 3u);
  EXPECT_NEAR(narrow[0], 1.0, 1e-12);
  EXPECT_NEAR(narrow[1], 2.0, 1e-12);
  EXPECT_NEAR(narrow.back(), 5.0, 1e-12);
}

TEST(LatencyLogAxis, TickLabels) {
  EXPECT_EQ(tick_label(0.02), "0.02 ms");
  EXPECT_EQ(tick_label(100), "100 ms");
  EXPECT_EQ(tick_label(2000), "2 s");
}

TEST(LatencyText, ASpreadShowsItsMedianAndRange) {
  EXPECT_EQ(spread_text(spread_of({0.6, 0.51, 0.48})), "0.51 ms (range 0.48 ms to 0.60 ms)");
  EXPECT_EQ(spread_text(spread_of({1250.0})), "1.25 s");
  EXPECT_EQ(spread_text(spread_of({})), "-");
  EXPECT_EQ(duration_text(12.4), "12 ms");
}

}  // namespace
}  // namespace cubeforge::app
