// Numbers from JSON files a user (or a crash) may have left in any state.
// nlohmann-json converts a number of the wrong kind by casting, and a cast of
// 3e19 to an int, or of 1e300 to a float, is undefined behaviour; 1e-256 and
// 1e-40 become 0 and a denormal as floats. The value is narrowed to the
// field's type and checked there (inference/core/checked_number.h): NaN,
// infinities, overflow, underflow to 0 and denormals are refused, and a whole
// number is required for an integer field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "inference/core/checked_number.h"
#include "inference/core/result.h"

namespace cubeforge::app {

// Stores `value` in `out` when it is a number that `T` holds (within `range`);
// otherwise an error naming `field` (and `file`, when given), the value and
// what the field takes. `out` is unchanged on error.
template <class T>
Status json_number(const nlohmann::json& value, T& out, const std::string& field, const std::string& file = {},
                   const NumberRange<T>& range = {}) {
  CUBEFORGE_ASSIGN_OR_RETURN(const T narrowed, narrow_json_number<T>(value, range, NumberSource{file, field}));
  out = narrowed;
  return ok_status();
}

}  // namespace cubeforge::app
