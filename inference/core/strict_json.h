// JSON read from files, parsed strictly and with its nesting bounded.
//
// nlohmann's parser is iterative, but much of what follows a parse is not:
// dump(), copies and comparisons recurse once per level, and a value nested a
// hundred thousand levels deep ends them on the stack. Here the parse goes
// through a SAX handler of our own that stops at the first level past
// `max_depth`, before any of that exists; that also makes the parse linear
// (nlohmann's callback parser walks an object's members again at every
// nested object's end: quadratic in a wide header). Duplicate keys, which a
// JSON object would silently resolve to one of the two values, are errors,
// at every level.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "inference/core/result.h"

namespace cubeforge {

// Deep enough for every JSON format cubeforge reads (a glTF's extensions and
// extras included); far from what recursion over a value could not handle.
inline constexpr int kMaxJsonDepth = 64;

// The JSON value of `text`, or a kCorruptFile error that says why and where:
// invalid JSON, nesting deeper than `max_depth` (objects and arrays), or a key
// given twice in one object ("key 'k' appears twice in text_config").
Result<nlohmann::json> parse_json_strictly(std::string_view text, int max_depth = kMaxJsonDepth);
// The same, the message prefixed with the quoted `file_name`.
Result<nlohmann::json> parse_json_file_strictly(std::string_view text, std::string_view file_name,
                                                int max_depth = kMaxJsonDepth);

// A value as a message shows it: its JSON, cut after `max_chars` (a value
// from a file can be a megabyte long).
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 40);

}  // namespace cubeforge
