// Untrusted text is printable after escaping: no control characters, valid
// UTF-8, valid text unchanged, and escaping twice changes nothing.
#include "inference/core/untrusted_text.h"

#include <gtest/gtest.h>

#include "inference/core/result.h"

namespace cubeforge {
namespace {

bool printable(const std::string& text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7F) return false;
  return true;
}

TEST(UntrustedText, TerminalEscapesBecomeVisible) {
  const std::string title_and_clear = "x\x1b]0;PWNED\x07\x1b[2J";
  const std::string escaped = escape_untrusted(title_and_clear);
  EXPECT_EQ(escaped, "x\\x1B]0;PWNED\\x07\\x1B[2J");
  EXPECT_TRUE(printable(escaped));
  EXPECT_EQ(escape_untrusted("\xC2\x9B" "31m"), "\\x9B31m");           // C1 CSI, valid UTF-8
  EXPECT_EQ(escape_untrusted("a\xE2\x80\xAE" "b"), "a\\u{202E}b");     // right-to-left override
}

TEST(UntrustedText, InvalidUtf8BytesAreEscapedValidTextKept) {
  EXPECT_EQ(escape_untrusted("chair \xFF\xFE"), "chair \\xFF\\xFE");
  EXPECT_EQ(escape_untrusted("\xC3\xA9t\xC3\xA9 \xE6\xA4\x85\xE5\xAD\x90 \xF0\x9F\xAA\x91"), "\xC3\xA9t\xC3\xA9 \xE6\xA4\x85\xE5\xAD\x90 \xF0\x9F\xAA\x91");
  EXPECT_EQ(escape_untrusted("\xC0\xAF"), "\\xC0\\xAF");              // overlong '/'
  EXPECT_EQ(escape_untrusted("\xED\xA0\x80"), "\\xED\\xA0\\x80");     // a surrogate
  EXPECT_EQ(escape_untrusted("\xE6\xA4"), "\\xE6\\xA4");              // cut short
}

TEST(UntrustedText, EscapingIsIdempotentAndErrorsArePrintedEscaped) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  const std::string once = escape_untrusted(all);
  EXPECT_EQ(escape_untrusted(once), once);
  EXPECT_TRUE(printable(once));
  const Error error = make_error(ErrorCode::kCorruptFile, "tensor 'x\x1b[2J' is bad");
  EXPECT_EQ(error.to_string(), "corrupt file: tensor 'x\\x1B[2J' is bad");
}

}  // namespace
}  // namespace cubeforge
