// Captions for commands that run many generations (calibrate-kv, compare):
// every --prompt, then the lines of a --prompts file (blank lines and lines
// starting with '#' skipped). The file is held to its budget
// (CUBEFORGE_MAX_PROMPTS_BYTES) before a byte of it is read.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/input_budgets.h"
#include "inference/core/result.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge::cli {

inline Result<std::vector<std::string>> prompt_list(const std::vector<std::string>& prompts,
                                                    const std::string& prompts_file) {
  std::vector<std::string> all = prompts;
  if (!prompts_file.empty()) {
    uint64_t size = 0;
    CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(prompts_file, &size));
    ::close(fd);
    CUBEFORGE_TRY(check_input_budget(InputBudget::kPromptsFileBytes, size,
                                     single_quoted(escape_untrusted(prompts_file)) + ": the --prompts file"));
    CUBEFORGE_ASSIGN_OR_RETURN(const uint64_t budget, input_budget(InputBudget::kPromptsFileBytes));
    CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(prompts_file, budget));
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
