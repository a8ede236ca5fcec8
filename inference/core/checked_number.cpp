// Messages and text parsing for narrowed numbers (see checked_number.h).
#include "inference/core/checked_number.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "inference/core/untrusted_text.h"

namespace cubeforge {

namespace number_detail {

namespace {

std::string formatted(long double value, bool whole) {
  char buffer[64];
  if (whole) std::snprintf(buffer, sizeof buffer, "%.0Lf", value);
  else std::snprintf(buffer, sizeof buffer, "%.9Lg", value);
  return buffer;
}

}  // namespace

std::string shown_value(double value, std::string_view text) {
  return text.empty() ? formatted(value, false) : std::string(text);
}
std::string shown_value(int64_t value, std::string_view text) {
  return text.empty() ? std::to_string(value) : std::string(text);
}
std::string shown_value(uint64_t value, std::string_view text) {
  return text.empty() ? std::to_string(value) : std::string(text);
}

std::string describe_range(long double low, long double high, bool low_exclusive, bool whole,
                           long double smallest_normal, const char* float_type) {
  if (whole) {
    const long double first = low_exclusive ? low + 1 : low;
    return "a whole number from " + formatted(first, true) + " to " + formatted(high, true);
  }
  std::string from;
  if (low_exclusive && low == 0)
    from = "from " + formatted(smallest_normal, false) + " (the smallest normal " + float_type + ")";
  else if (low_exclusive)
    from = "above " + formatted(low, false);
  else
    from = "from " + formatted(low, false);
  std::string to = (low_exclusive && low != 0 ? "and at most " : "to ") + formatted(high, false);
  return "a number " + from + " " + to + (smallest_normal > 0 && !(low_exclusive && low == 0) ? ", not a denormal" : "");
}

Error refused(const NumberSource& source, const std::string& shown, const std::string& problem,
              const std::string& accepted) {
  std::string message;
  if (!source.file.empty()) message = single_quoted(source.file) + ": ";
  // A number's text is short; anything longer is shown as its start.
  constexpr size_t kShownBytes = 64;
  message += source.field + " = " + readable_untrusted(shown, kShownBytes) + " " + problem + "; it must be " + accepted;
  return make_error(ErrorCode::kCorruptFile, std::move(message));
}

}  // namespace number_detail

ParsedNumber parse_number_text(std::string_view text) {
  ParsedNumber parsed;
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  // YAML's spellings of infinity and NaN.
  for (std::string_view inf : {".inf", ".Inf", ".INF"})
    if (body == inf) {
      parsed.kind = ParsedNumber::Kind::kFloat;
      parsed.float_value = negative ? -HUGE_VAL : HUGE_VAL;
      return parsed;
    }
  for (std::string_view nan : {".nan", ".NaN", ".NAN"})
    if (text == nan) {
      parsed.kind = ParsedNumber::Kind::kFloat;
      parsed.float_value = std::nan("");
      return parsed;
    }
  if (body.empty() || body[0] == '+' || body[0] == '-') return parsed;
  const char* begin = text[0] == '+' ? text.data() + 1 : text.data();  // from_chars takes '-' but not '+'
  const char* end = text.data() + text.size();
  int64_t signed_value = 0;
  if (auto [at, error] = std::from_chars(begin, end, signed_value); error == std::errc() && at == end) {
    parsed.kind = ParsedNumber::Kind::kSigned;
    parsed.signed_value = signed_value;
    return parsed;
  }
  uint64_t unsigned_value = 0;
  if (auto [at, error] = std::from_chars(begin, end, unsigned_value); error == std::errc() && at == end) {
    parsed.kind = ParsedNumber::Kind::kUnsigned;
    parsed.unsigned_value = unsigned_value;
    return parsed;
  }
  double value = 0;
  const auto [at, error] = std::from_chars(begin, end, value);
  if (at != end) return parsed;
  if (error == std::errc()) {
    parsed.kind = ParsedNumber::Kind::kFloat;
    parsed.float_value = value;
  } else if (error == std::errc::result_out_of_range) {
    // from_chars leaves the value unset; strtod says which way it went.
    const std::string copy(begin, end);
    const double rounded = std::strtod(copy.c_str(), nullptr);
    parsed.kind = std::isinf(rounded) ? ParsedNumber::Kind::kOverflow : ParsedNumber::Kind::kUnderflow;
  }
  return parsed;
}

}  // namespace cubeforge
