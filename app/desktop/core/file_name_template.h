// Export file names from a template such as "{prompt}-{seed}.glb".
//
// Placeholders: {prompt} (slugified: lower-case ASCII letters and digits,
// everything else one '-', at most 48 characters), {seed}, {resolution},
// {date} (YYYYMMDD) and {time} (HHMMSS). An unknown or unclosed placeholder is
// an error naming it, so a typo never silently becomes part of a file name.
#pragma once

#include <cstdint>
#include <string>

#include "inference/core/result.h"

namespace cubeforge::app {

// "A Red Dragon!" -> "a-red-dragon"; empty or symbol-only text -> "untitled".
std::string slugify(const std::string& text, size_t max_length = 48);

struct FileNameFields {
  std::string prompt;
  uint64_t seed = 0;
  int resolution = 0;
  std::string date;  // YYYYMMDD
  std::string time;  // HHMMSS
};

// Fills date and time from the local clock.
FileNameFields fields_now(const std::string& prompt, uint64_t seed, int resolution);

Result<std::string> expand_file_name_template(const std::string& pattern, const FileNameFields& fields);

}  // namespace cubeforge::app
