// The detail the app starts with on a machine of a given speed, and the
// expected time it shows beside the detail control. Speeds are given, not
// measured, so nothing here depends on the machine running the test.
#include "app/desktop/core/detail_timing.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/desktop/core/app_settings.h"

namespace cubeforge::app {
namespace {

TEST(DetailTiming, ExpectedTimesGrowWithDetailFromTheMeasuredOne) {
  EXPECT_DOUBLE_EQ(expected_generation_ms(120, kDetailCalibrationResolution), 120);
  for (int r = 3; r <= 10; ++r) EXPECT_GT(expected_generation_ms(120, r), expected_generation_ms(120, r - 1)) << r;
  EXPECT_DOUBLE_EQ(expected_generation_ms(240, 8), 2 * expected_generation_ms(120, 8)) << "time scales with speed";
}

TEST(DetailTiming, TheDefaultIsTheFinestDetailThatAnswersInAboutASecond) {
  int previous = kFinestDefaultDetail;
  for (double calibration_ms : {1.0, 10.0, 50.0, 100.0, 200.0, 400.0, 800.0, 2000.0, 10000.0}) {
    SCOPED_TRACE(calibration_ms);
    const int detail = default_detail(calibration_ms);
    EXPECT_GE(detail, kCoarsestDefaultDetail);
    EXPECT_LE(detail, kFinestDefaultDetail);
    EXPECT_LE(detail, previous) << "a slower machine got a finer default";
    previous = detail;
    if (detail > kCoarsestDefaultDetail) {
      EXPECT_LE(expected_generation_ms(calibration_ms, detail), kDefaultDetailAnswerMs);
    }
    if (detail < kFinestDefaultDetail) {
      EXPECT_GT(expected_generation_ms(calibration_ms, detail + 1), kDefaultDetailAnswerMs);
    }
  }
  EXPECT_EQ(default_detail(1.0), kFinestDefaultDetail) << "a fast machine keeps the finest default";
  EXPECT_EQ(default_detail(10000.0), kCoarsestDefaultDetail) << "a very slow one the coarsest";
}

TEST(DetailTiming, ExpectedTimeInWords) {
  EXPECT_EQ(expected_time_text(430), "about 0.4 s");
  EXPECT_EQ(expected_time_text(20), "about 0.1 s");
  EXPECT_EQ(expected_time_text(2600), "about 3 s");
  EXPECT_EQ(expected_time_text(130000), "about 2 min");
}

TEST(DetailTiming, ASetDetailIsChosenAndTheMeasurementIsKept) {
  AppSettings settings;
  EXPECT_FALSE(settings.resolution_chosen);
  ASSERT_TRUE(set_setting(settings, "resolution", "7").ok());
  EXPECT_TRUE(settings.resolution_chosen);
  settings.detail_calibration_ms = 123.5;
  auto read = settings_from_json(settings_to_json(settings));
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->detail_calibration_ms, 123.5);
  EXPECT_TRUE(read->resolution_chosen);
  auto negative = settings_from_json(nlohmann::json{{"detail_calibration_ms", -1}});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("detail_calibration_ms"), std::string::npos) << negative.error().message;
}

}  // namespace
}  // namespace cubeforge::app
