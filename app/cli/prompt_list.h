// Captions for commands that run many generations (calibrate-kv, compare):
// every --prompt, then the lines of a --prompts file (blank lines and lines
// starting with '#' skipped).
#pragma once

#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/result.h"

namespace cubeforge::cli {

inline Result<std::vector<std::string>> prompt_list(const std::vector<std::string>& prompts,
                                                    const std::string& prompts_file) {
  std::vector<std::string> all = prompts;
  if (!prompts_file.empty()) {
    CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(prompts_file));
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      start = end + 1;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      if (!line.empty() && line.front() != '#') all.push_back(line);
    }
  }
  if (all.empty())
    return make_error(ErrorCode::kInvalidArgument, "no captions: give --prompt TEXT (repeatable) or --prompts FILE");
  return all;
}

}  // namespace cubeforge::cli
