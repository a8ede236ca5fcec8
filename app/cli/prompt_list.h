// Captions for commands that run many generations (calibrate-kv, compare,
// decoding-compare, bench-meshing): every --prompt, then the lines of a
// --prompts file (blank lines and lines starting with '#' skipped). The file
// is read only when it is a regular file of at most kMaxPromptsFileBytes: a
// FIFO, a device or a sparse file of gigabytes is refused by name, not read
// without end.
#pragma once

#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/result.h"

namespace cubeforge::cli {

// Far more captions than any run generates (a caption is a line of text).
inline constexpr uint64_t kMaxPromptsFileBytes = uint64_t(4) << 20;

// The captions of a --prompts file.
inline Result<std::vector<std::string>> read_prompts_file(const std::string& prompts_file) {
  auto text = read_file_text(prompts_file, kMaxPromptsFileBytes);
  if (!text.ok())
    return make_error(text.error().code, "--prompts: " + text.error().message +
                                             (text.error().code == ErrorCode::kInvalidArgument
                                                  ? " (a prompts file holds one caption per line, at most " +
                                                        std::to_string(kMaxPromptsFileBytes >> 20) + " MiB)"
                                                  : ""));
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
