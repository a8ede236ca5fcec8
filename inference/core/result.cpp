// Error formatting and the fatal-invariant handler.
#include "inference/core/result.h"

#include "inference/core/untrusted_text.h"

namespace cubeforge {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kCorruptFile: return "corrupt file";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal error";
  }
  return "error";
}

// Messages quote file contents and names; what reaches a terminal, log or
// JSON is escaped (see untrusted_text.h).
std::string Error::to_string() const { return std::string(error_code_name(code)) + ": " + escape_untrusted(message); }

void check_failed(const char* expression, const char* file, int line, const char* hint) {
  std::fprintf(stderr, "cubeforge: invariant failed: %s\n  at %s:%d\n  hint: %s\n", expression, file, line,
               hint ? hint : "");
  std::abort();
}

}  // namespace cubeforge
