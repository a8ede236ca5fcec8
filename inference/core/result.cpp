// Error formatting and the fatal-invariant handler.
#include "inference/core/result.h"

#include <cstdint>

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

namespace {

// Longer messages (one quoting a huge name from a file whole) keep their start
// and end, where what failed and what to do are said.
constexpr size_t kMaxMessageBytes = 4096;
constexpr size_t kMessageTailBytes = 1024;

}  // namespace

// Messages quote file contents and names; what reaches a terminal, log or
// JSON is escaped (see untrusted_text.h) and of a readable length.
std::string Error::to_string() const {
  std::string text = error_code_name(code);
  text += ": ";
  if (message.size() <= kMaxMessageBytes) return text + escape_untrusted(message);
  size_t tail = message.size() - kMessageTailBytes;
  while (tail < message.size() && (uint8_t(message[tail]) & 0xC0) == 0x80) ++tail;  // not inside a UTF-8 sequence
  size_t head = kMaxMessageBytes - kMessageTailBytes;
  while (head > 0 && (uint8_t(message[head]) & 0xC0) == 0x80) --head;
  text += escape_untrusted(std::string_view(message).substr(0, head));
  text += " [... " + std::to_string(tail - head) + " bytes of this message left out ...] ";
  text += escape_untrusted(std::string_view(message).substr(tail));
  return text;
}

void check_failed(const char* expression, const char* file, int line, const char* hint) {
  std::fprintf(stderr, "cubeforge: invariant failed: %s\n  at %s:%d\n  hint: %s\n", expression, file, line,
               hint ? hint : "");
  std::abort();
}

}  // namespace cubeforge
