// Checks of command-line values with messages that say what a value must be
// (CLI11's own ranges print "not in range 0.000000 to 1797693...").
#pragma once

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

namespace cubeforge::cli {

// A finite number in [low, high] (or (low, high] with `low_exclusive`);
// `meaning` says what the values do, e.g. "0 turns guidance off".
inline CLI::Validator number_in(double low, double high, bool low_exclusive, const std::string& meaning) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        try {
          size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size()) return "takes a number, not '" + text + "'";
        } catch (const std::exception&) {
          return "takes a number, not '" + text + "'";
        }
        const bool fits = std::isfinite(value) && (low_exclusive ? value > low : value >= low) && value <= high;
        if (fits) return {};
        std::string range = (low_exclusive ? "above " : "from ") + CLI::detail::to_string(low);
        if (high < std::numeric_limits<double>::max())
          range += (low_exclusive ? " and at most " : " to ") + CLI::detail::to_string(high);
        return "must be a number " + range + " (" + meaning + "), not '" + text + "'";
      },
      "", "number_in");
}

// A whole number in [low, high].
inline CLI::Validator whole_number_in(long long low, long long high, const std::string& meaning) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        long long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc() && end == text.data() + text.size() && value >= low && value <= high) return {};
        return "must be a whole number from " + std::to_string(low) + " to " + std::to_string(high) + " (" + meaning +
               "), not '" + text + "'";
      },
      "", "whole_number_in");
}

// A seed: any whole number that fits 64 bits, refused (not clamped) beyond.
inline CLI::Validator seed_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        unsigned long long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc() && end == text.data() + text.size()) return {};
        return "must be a whole number from 0 to " + std::to_string(std::numeric_limits<uint64_t>::max()) +
               ", not '" + text + "'";
      },
      "", "seed_number");
}

}  // namespace cubeforge::cli
