// Resolving --model: the given folder, else the built-in one, else a clear
// message on how to assemble a model folder.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include <unistd.h>

#include "inference/pipeline/cube_model.h"

namespace cubeforge::cli {

inline std::optional<CubeModel> load_model_or_report(const std::string& given, const char* command,
                                                     const WeightOptions& weights = {}) {
  std::filesystem::path folder = given.empty() ? default_model_folder() : std::filesystem::path(given);
  if (folder.empty()) {
    std::fprintf(stderr, "%s: no model folder given and no built-in model found; pass --model DIR. %s\n", command,
                 kModelFolderHelp);
    return std::nullopt;
  }
  auto model = CubeModel::load(folder, {}, weights);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", command, model.error().to_string().c_str());
    return std::nullopt;
  }
  return std::move(*model);
}

// False (after saying why) when `out` cannot be written: checked before any
// long work so a typo in the path costs nothing.
inline bool output_folder_writable(const std::string& out, const char* command) {
  const std::filesystem::path parent = std::filesystem::path(out).parent_path();
  const std::filesystem::path folder = parent.empty() ? std::filesystem::path(".") : parent;
  if (std::filesystem::is_directory(folder) && ::access(folder.c_str(), W_OK) == 0) return true;
  std::fprintf(stderr, "%s: cannot write '%s': the folder '%s' does not exist or is not writable\n", command,
               out.c_str(), folder.c_str());
  return false;
}

}  // namespace cubeforge::cli
