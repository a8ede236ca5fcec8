// Expected generation time by detail (detail_timing.h).
#include "app/desktop/core/detail_timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cubeforge::app {

namespace {

// A whole generation's time at resolutions 2..10 relative to resolution 6,
// measured with cubeforge-cli on the built-in model (docs/performance.md,
// "Detail and time"); 2..4 and 10 are extended from their neighbours.
constexpr int kFirstResolution = 2, kLastResolution = 10;
constexpr double kRelativeCost[] = {
    /* 2 */ 0.45, /* 3 */ 0.48, /* 4 */ 0.5,  /* 5 */ 0.6,    /* 6 */ 1.0,
    /* 7 */ 1.7,  /* 8 */ 6.8,  /* 9 */ 33.0, /* 10 */ 160.0,
};

}  // namespace

double expected_generation_ms(double calibration_ms, int resolution) {
  resolution = std::clamp(resolution, kFirstResolution, kLastResolution);
  return calibration_ms * kRelativeCost[resolution - kFirstResolution];
}

int default_detail(double calibration_ms) {
  int detail = kCoarsestDefaultDetail;
  for (int r = kCoarsestDefaultDetail; r <= kFinestDefaultDetail; ++r)
    if (expected_generation_ms(calibration_ms, r) <= kDefaultDetailAnswerMs) detail = r;
  return detail;
}

std::string expected_time_text(double ms) {
  char text[32];
  const double seconds = ms / 1000.0;
  if (seconds < 0.95)
    std::snprintf(text, sizeof text, "about %.1f s", std::max(seconds, 0.1));
  else if (seconds < 99.5)
    std::snprintf(text, sizeof text, "about %.0f s", seconds);
  else
    std::snprintf(text, sizeof text, "about %.0f min", std::max(2.0, std::round(seconds / 60.0)));
  return text;
}

}  // namespace cubeforge::app
