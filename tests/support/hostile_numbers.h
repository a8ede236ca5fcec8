// Numbers a file may hold that no field wanting a positive normal float (an
// epsilon, a temperature, a bounding-box side) can take, as each reader's
// table-driven test writes them into its own file format: every reader must
// refuse every one, naming the file and the field. Each is a different way of
// failing once narrowed to a float: underflow to 0, a denormal, overflow,
// infinity, NaN, or simply not positive.
#pragma once

#include <string>
#include <vector>

namespace cubeforge::testing {

struct HostileNumber {
  std::string text;    // as written in the file
  std::string reason;  // what the refusal says (for readers that read it as a number)
  bool json = true;    // JSON can spell it; JSON has no infinity or NaN, and 1e400 fails to parse
};

inline std::vector<HostileNumber> not_positive_normal_floats() {
  return {
      {"1e-256", "underflows to 0"},
      {"1e-0256", "underflows to 0"},  // found by fuzzing clip/config.json's layer_norm_eps
      {"1e-40", "denormal"},
      {"1e-45", "denormal"},
      {"3.5e38", "overflows"},
      {"1e39", "overflows"},
      {"0", "outside the accepted range"},
      {"-1e-05", "outside the accepted range"},
      {"1e400", "overflows", false},
      {".inf", "infinite", false},
      {".nan", "NaN", false},
  };
}

// Whole-number fields (sizes, counts, seeds, shapes, offsets).
inline std::vector<HostileNumber> not_whole_numbers_that_fit() {
  return {
      {"1e-256", "not a whole number"},
      {"1.5", "not a whole number"},
      {"-1", ""},
      {"18446744073709551616", ""},
      {"1e400", "overflows", false},
      {".nan", "NaN", false},
  };
}

}  // namespace cubeforge::testing
