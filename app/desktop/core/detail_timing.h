// How long a generation takes at each detail (meshing resolution) on the
// machine in hand, and the detail the app starts with.
//
// One small generation is timed on this machine once (at
// kDetailCalibrationResolution, on the app's first launch; the result is kept
// in the settings) and scaled by each resolution's cost relative to it. The
// relative costs were measured once on the built-in model, where meshing
// dominates; docs/performance.md ("Detail and time") has the figures and the
// command. The default detail is the finest whose expected time is within
// about a second, so a first generation answers quickly on a slow machine and
// a fast one still starts fine.
#pragma once

#include <string>

namespace cubeforge::app {

inline constexpr int kDetailCalibrationResolution = 6;
// The details the app may pick by itself (the slider offers 4..9).
inline constexpr int kCoarsestDefaultDetail = 5, kFinestDefaultDetail = 8;
inline constexpr double kDefaultDetailAnswerMs = 1000.0;

// The expected time of a generation at `resolution`, from one that took
// `calibration_ms` at kDetailCalibrationResolution here.
double expected_generation_ms(double calibration_ms, int resolution);
// The finest detail in kCoarsestDefaultDetail..kFinestDefaultDetail expected
// within kDefaultDetailAnswerMs (the coarsest when none is).
int default_detail(double calibration_ms);
// "about 0.4 s", "about 12 s", "about 2 min".
std::string expected_time_text(double ms);

}  // namespace cubeforge::app
