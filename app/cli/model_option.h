// Resolving --model: the given folder, else the built-in one, else a clear
// message on how to assemble a model folder.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "inference/pipeline/cube_model.h"

namespace cubeforge::cli {

inline std::optional<CubeModel> load_model_or_report(const std::string& given, const char* command) {
  std::filesystem::path folder = given.empty() ? default_model_folder() : std::filesystem::path(given);
  if (folder.empty()) {
    std::fprintf(stderr, "%s: no model folder given and no built-in model found; pass --model DIR. %s\n", command,
                 kModelFolderHelp);
    return std::nullopt;
  }
  auto model = CubeModel::load(folder);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", command, model.error().to_string().c_str());
    return std::nullopt;
  }
  return std::move(*model);
}

}  // namespace cubeforge::cli
