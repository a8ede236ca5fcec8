// Captions for commands that run many generations (calibrate-kv, compare,
// decoding-compare, bench-meshing): every --prompt, then the lines of a
// --prompts file (blank lines and lines starting with '#' skipped). The file
// must be a regular file held to its budget (CUBEFORGE_MAX_PROMPTS_BYTES)
// before a byte of it is read: a FIFO, a device or a sparse file of gigabytes
// is refused by name, not read without end.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/input_budgets.h"
#include "inference/core/result.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge::cli {

// The captions of a --prompts file.
inline Result<std::vector<std::string>> read_prompts_file(const std::string& prompts_file) {
  uint64_t size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(prompts_file, &size));
  ::close(fd);
  CUBEFORGE_TRY(check_input_budget(InputBudget::kPromptsFileBytes, size,
                                   single_quoted(escape_untrusted(prompts_file)) + ": the --prompts file"));
  CUBEFORGE_ASSIGN_OR_RETURN(const uint64_t budget, input_budget(InputBudget::kPromptsFileBytes));
  auto text = read_file_text(prompts_file, budget);
  if (!text.ok()) return make_error(text.error().code, "--prompts: " + text.error().message);
  std::vector<std::string> prompts;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty() && line.front() != '#') prompts.push_back(line);
  }
  return prompts;
}

inline Result<std::vector<std::string>> prompt_list(const std::vector<std::string>& prompts,
                                                    const std::string& prompts_file) {
  std::vector<std::string> all = prompts;
  if (!prompts_file.empty()) {
    CUBEFORGE_ASSIGN_OR_RETURN(std::vector<std::string> from_file, read_prompts_file(prompts_file));
    all.insert(all.end(), from_file.begin(), from_file.end());
  }
  if (all.empty())
    return make_error(ErrorCode::kInvalidArgument, "no captions: give --prompt TEXT (repeatable) or --prompts FILE");
  return all;
}

}  // namespace cubeforge::cli
