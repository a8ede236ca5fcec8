// Numbers read from files, checked after they are narrowed to the type the
// engine keeps them in.
//
// A reader gets a double (or a 64-bit integer) from a JSON or YAML parser and
// stores a float or an int. Checking the double is not enough: 1e-256 is a
// positive double but 0 as a float (an epsilon of 0 divides by zero), 1e-40 is
// a float only as a denormal, 3e38 is a float whose square is infinite, and a
// double beyond a float's range cast to one is undefined behaviour.
// narrow_number() narrows first and checks what the engine will hold:
//   - NaN and infinities are refused;
//   - a value beyond the type's range is refused (never cast, never clamped);
//   - a non-zero value that becomes 0 (underflow) or a denormal is refused;
//   - an integer type takes whole numbers only;
//   - then the field's own range.
// The error names the file, the field, the value as written and what the
// field accepts. Every reader of numbers from files goes through here: CLIP's
// config.json, config.yaml, the desktop app's settings, history and scripts.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "inference/core/result.h"

namespace cubeforge {

// Where a number came from, for messages: the file (as the user named it)
// and the field inside it ("text_config.layer_norm_eps").
struct NumberSource {
  std::string file;
  std::string field;
};

// What a field accepts, in the type it is kept in: [low, high], or
// (low, high] with low_exclusive. For floating-point types (low, high] with
// low = 0 means a positive normal number (denormals are always refused).
template <class T>
struct NumberRange {
  T low = std::numeric_limits<T>::lowest();
  T high = std::numeric_limits<T>::max();
  bool low_exclusive = false;
};

// A positive number up to `high`: from 1 for integers; for floats, from the
// smallest normal value.
template <class T>
constexpr NumberRange<T> positive_up_to(T high) {
  if constexpr (std::is_integral_v<T>) return {T(1), high, false};
  else return {T(0), high, true};
}

namespace number_detail {

// The value as shown in messages: the file's spelling when known.
std::string shown_value(double value, std::string_view text);
std::string shown_value(int64_t value, std::string_view text);
std::string shown_value(uint64_t value, std::string_view text);

// "a 32-bit float", "a 32-bit integer", ...
template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "a 32-bit float";
  else if constexpr (std::is_same_v<T, double>) return "a 64-bit float";
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return sizeof(T) == 8 ? "a 64-bit integer" : sizeof(T) == 4 ? "a 32-bit integer" : "a small integer";
  else return sizeof(T) == 8 ? "an unsigned 64-bit integer" : "an unsigned integer";
}

// "a number from 1.17549435e-38 (the smallest normal 32-bit float) to 1", "a whole number from 1 to 16777216".
// `float_type` names the type of a floating-point field ("32-bit float").
std::string describe_range(long double low, long double high, bool low_exclusive, bool whole,
                           long double smallest_normal, const char* float_type);

template <class T>
std::string accepted(const NumberRange<T>& range) {
  const bool whole_type = !range.low_exclusive && range.low == std::numeric_limits<T>::lowest() &&
                          range.high == std::numeric_limits<T>::max();
  if (whole_type) {
    if constexpr (std::is_integral_v<T>) return std::string("a whole number that fits ") + type_name<T>();
    else return std::string("a finite number that fits ") + type_name<T>() + " (0 or normal, not a denormal)";
  }
  if constexpr (std::is_integral_v<T>) {
    return describe_range((long double)range.low, (long double)range.high, range.low_exclusive, true, 0, type_name<T>());
  } else {
    return describe_range(range.low, range.high, range.low_exclusive, false, std::numeric_limits<T>::min(),
                          std::is_same_v<T, float> ? "32-bit float" : "64-bit float");
  }
}

Error refused(const NumberSource& source, const std::string& shown, const std::string& problem,
              const std::string& accepted);

template <class T>
bool in_range(T value, const NumberRange<T>& range) {
  const bool above_low = range.low_exclusive ? value > range.low : value >= range.low;
  return above_low && value <= range.high;
}

}  // namespace number_detail

// `value` as read from the file (spelled `text` there, when known), narrowed
// to T and checked (see the top of this file).
template <class T>
Result<T> narrow_number(double value, const NumberRange<T>& range, const NumberSource& source,
                        std::string_view text = {}) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  using namespace number_detail;
  const std::string shown = shown_value(value, text);
  auto refuse = [&](const std::string& problem) -> Error { return refused(source, shown, problem, accepted(range)); };
  if (std::isnan(value)) return refuse("is not a number (NaN)");
  if (std::isinf(value)) return refuse("is infinite");
  if constexpr (std::is_integral_v<T>) {
    if (value != std::trunc(value)) return refuse("is not a whole number");
    // Compared as long double: 2^63 and 2^64 are exact there, and every T's bounds are.
    const long double whole = value;
    if (whole < (long double)std::numeric_limits<T>::min() || whole > (long double)std::numeric_limits<T>::max())
      return refuse(std::string("does not fit ") + type_name<T>());
    const T narrowed = T(value);
    if (!in_range(narrowed, range)) return refuse("is outside the accepted range");
    return narrowed;
  } else {
    if (std::fabs(value) > double(std::numeric_limits<T>::max()))
      return refuse(std::string("overflows ") + type_name<T>() + " (the largest is " +
                    shown_value(double(std::numeric_limits<T>::max()), {}) + ")");
    const T narrowed = T(value);
    if (value != 0 && narrowed == 0)
      return refuse(std::string("underflows to 0 as ") + type_name<T>() + " (the smallest normal one is " +
                    shown_value(double(std::numeric_limits<T>::min()), {}) + ")");
    if (std::fpclassify(narrowed) == FP_SUBNORMAL)
      return refuse(std::string("is a denormal as ") + type_name<T>() + " (below the smallest normal one, " +
                    shown_value(double(std::numeric_limits<T>::min()), {}) + ")");
    if (!in_range(narrowed, range)) return refuse("is outside the accepted range");
    return narrowed;
  }
}

template <class T>
Result<T> narrow_number(int64_t value, const NumberRange<T>& range, const NumberSource& source,
                        std::string_view text = {}) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  using namespace number_detail;
  if constexpr (std::is_integral_v<T>) {
    const std::string shown = shown_value(value, text);
    const bool fits = std::is_signed_v<T>
                          ? value >= int64_t(std::numeric_limits<T>::min()) &&
                                (value <= 0 || uint64_t(value) <= uint64_t(std::numeric_limits<T>::max()))
                          : value >= 0 && uint64_t(value) <= uint64_t(std::numeric_limits<T>::max());
    if (!fits) return refused(source, shown, std::string("does not fit ") + type_name<T>(), accepted(range));
    if (!in_range(T(value), range)) return refused(source, shown, "is outside the accepted range", accepted(range));
    return T(value);
  } else {
    return narrow_number<T>(double(value), range, source, text.empty() ? shown_value(value, {}) : text);
  }
}

template <class T>
Result<T> narrow_number(uint64_t value, const NumberRange<T>& range, const NumberSource& source,
                        std::string_view text = {}) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  using namespace number_detail;
  if constexpr (std::is_integral_v<T>) {
    const std::string shown = shown_value(value, text);
    if (value > uint64_t(std::numeric_limits<T>::max()))
      return refused(source, shown, std::string("does not fit ") + type_name<T>(), accepted(range));
    if (!in_range(T(value), range)) return refused(source, shown, "is outside the accepted range", accepted(range));
    return T(value);
  } else {
    return narrow_number<T>(double(value), range, source, text.empty() ? shown_value(value, {}) : text);
  }
}

// A number written as text (a YAML scalar, a script's argument): decimal or
// scientific notation, whole numbers exactly to 64 bits; YAML's .inf and .nan
// are read (and then refused). Anything else is "not a number".
template <class T>
Result<T> narrow_number_text(std::string_view text, const NumberRange<T>& range, const NumberSource& source);

// The same for a parsed JSON value (nlohmann::json or a type with its
// is_number_* and get<> members): integers are narrowed exactly.
template <class T, class Json>
Result<T> narrow_json_number(const Json& value, const NumberRange<T>& range, const NumberSource& source) {
  if (value.is_number_unsigned()) return narrow_number<T>(value.template get<uint64_t>(), range, source);
  if (value.is_number_integer()) return narrow_number<T>(value.template get<int64_t>(), range, source);
  if (value.is_number_float()) return narrow_number<T>(value.template get<double>(), range, source);
  return number_detail::refused(source, value.dump(), "is not a number", number_detail::accepted(range));
}

// Parsing for narrow_number_text: the value that matches `kind` is set.
struct ParsedNumber {
  // kOverflow, kUnderflow: a number beyond what a double holds (1e400, 1e-400).
  enum class Kind { kNotANumber, kSigned, kUnsigned, kFloat, kOverflow, kUnderflow } kind = Kind::kNotANumber;
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;
  double float_value = 0;
};
ParsedNumber parse_number_text(std::string_view text);

template <class T>
Result<T> narrow_number_text(std::string_view text, const NumberRange<T>& range, const NumberSource& source) {
  const ParsedNumber parsed = parse_number_text(text);
  switch (parsed.kind) {
    case ParsedNumber::Kind::kSigned: return narrow_number<T>(parsed.signed_value, range, source, text);
    case ParsedNumber::Kind::kUnsigned: return narrow_number<T>(parsed.unsigned_value, range, source, text);
    case ParsedNumber::Kind::kFloat: return narrow_number<T>(parsed.float_value, range, source, text);
    case ParsedNumber::Kind::kOverflow:
      return number_detail::refused(source, std::string(text), "overflows even a 64-bit float",
                                    number_detail::accepted(range));
    case ParsedNumber::Kind::kUnderflow:
      return number_detail::refused(source, std::string(text), "underflows to 0 even as a 64-bit float",
                                    number_detail::accepted(range));
    case ParsedNumber::Kind::kNotANumber: break;
  }
  return number_detail::refused(source, std::string(text), "is not a number", number_detail::accepted(range));
}

}  // namespace cubeforge
