// The names of backend choices and kinds, as options and reports spell them.
#include "inference/backend/token_backend.h"

#include <string>

namespace cubeforge {

const char* backend_choice_name(BackendChoice choice) {
  switch (choice) {
    case BackendChoice::kAuto: return "auto";
    case BackendChoice::kCpu: return "cpu";
    case BackendChoice::kCuda: return "cuda";
  }
  return "?";
}

Result<BackendChoice> parse_backend_choice(std::string_view text) {
  if (text == "auto") return BackendChoice::kAuto;
  if (text == "cpu") return BackendChoice::kCpu;
  if (text == "cuda") return BackendChoice::kCuda;
  return make_error(ErrorCode::kInvalidArgument, "backend must be auto, cpu or cuda, not '" + std::string(text) + "'");
}

const char* backend_kind_name(BackendKind kind) { return kind == BackendKind::kCuda ? "cuda" : "cpu"; }

}  // namespace cubeforge
