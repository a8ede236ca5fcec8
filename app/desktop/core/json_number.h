// Numbers from JSON files a user (or a crash) may have left in any state.
// nlohmann-json converts a number of the wrong kind by casting, and a cast of
// 3e19 to an int, or of 1e300 to a float, is undefined behaviour: the kind and
// the range are checked first.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace cubeforge::app {

// Stores `value` in `out` and returns true when it is a number that `T`
// holds (a whole number for integer types, a finite one for floats).
template <class T>
bool json_number(const nlohmann::json& value, T& out) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const uint64_t v = value.get<uint64_t>();
      if (v > uint64_t(std::numeric_limits<T>::max())) return false;
      out = T(v);
      return true;
    }
    if (value.is_number_integer()) {
      const int64_t v = value.get<int64_t>();
      if (v < 0 && (!std::is_signed_v<T> || v < int64_t(std::numeric_limits<T>::min()))) return false;
      if (v > 0 && uint64_t(v) > uint64_t(std::numeric_limits<T>::max())) return false;
      out = T(v);
      return true;
    }
    return false;
  } else {
    if (!value.is_number()) return false;
    const double v = value.get<double>();
    if (!std::isfinite(v) || std::fabs(v) > double(std::numeric_limits<T>::max())) return false;
    out = T(v);
    return true;
  }
}

}  // namespace cubeforge::app
