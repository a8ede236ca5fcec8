// Untrusted text is printable after escaping: no control characters, no
// invisible or direction-changing characters, valid UTF-8, valid text
// unchanged, and escaping twice changes nothing; a long string is cut to a
// readable length with its full length said.
#include "inference/core/untrusted_text.h"

#include <gtest/gtest.h>

#include <vector>

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

TEST(UntrustedText, InvisibleAndDirectionMarksBecomeVisible) {
  struct Case {
    const char* text;
    const char* escaped;
  };
  for (const Case& c : std::vector<Case>{
           {"\xEF\xBB\xBF" "chair", "\\u{FEFF}chair"},            // byte order mark
           {"a\xE2\x80\x8B" "b", "a\\u{200B}b"},                   // zero-width space
           {"a\xE2\x80\x8D" "b", "a\\u{200D}b"},                   // zero-width joiner
           {"a\xE2\x80\x8F" "b", "a\\u{200F}b"},                   // right-to-left mark
           {"a\xE2\x81\xA7" "b\xE2\x81\xA9", "a\\u{2067}b\\u{2069}"},  // right-to-left isolate ... pop
           {"a\xE2\x81\xA0" "b", "a\\u{2060}b"},                   // word joiner
           {"a\xC2\xAD" "b", "a\\u{00AD}b"},                        // soft hyphen
           {"a\xE2\x80\xA8" "b", "a\\u{2028}b"},                   // line separator
           {"a\xD8\x9C" "b", "a\\u{061C}b"},                        // Arabic letter mark
           {"a\xE3\x85\xA4" "b", "a\\u{3164}b"},                   // Hangul filler
           {"a\xF3\xA0\x81\x81" "b", "a\\u{E0041}b"},             // tag character (hidden text)
       }) {
    EXPECT_EQ(escape_untrusted(c.text), c.escaped) << c.escaped;
    EXPECT_EQ(escape_untrusted(escape_untrusted(c.text)), c.escaped);
  }
  // Visible text of other scripts stays as it is.
  EXPECT_EQ(escape_untrusted("\xD9\x83\xD8\xB1\xD8\xB3\xD9\x8A \xE6\xA4\x85\xE5\xAD\x90"),
            "\xD9\x83\xD8\xB1\xD8\xB3\xD9\x8A \xE6\xA4\x85\xE5\xAD\x90");
}

TEST(UntrustedText, LongTextIsCutToAReadableLengthWithItsFullLength) {
  const std::string name(20u << 20, 'y');
  const std::string shown = readable_untrusted(name);
  EXPECT_LT(shown.size(), kReadableBytes + 64);
  EXPECT_EQ(shown.substr(0, 10), "yyyyyyyyyy");
  EXPECT_NE(shown.find("... (20971520 bytes in all)"), std::string::npos) << shown;
  EXPECT_EQ(readable_untrusted("short\x07"), "short\\x07");  // no note when nothing is cut
  // The cut never splits a character; escapes count at their printed length.
  const std::string chairs = [] {
    std::string s;
    for (int i = 0; i < 200; ++i) s += "\xE6\xA4\x85";
    return s;
  }();
  const std::string cut = readable_untrusted(chairs, 100);
  EXPECT_EQ(escape_untrusted(cut), cut);  // valid UTF-8 throughout
  EXPECT_NE(cut.find("(600 bytes in all)"), std::string::npos);
  EXPECT_EQ(quoted_untrusted("a\x1b"), "'a\\x1B'");
}

TEST(UntrustedText, LinesKeepTheirBreaksAndNothingElseRaw) {
  EXPECT_EQ(escape_untrusted_lines("--weights: \x1b[2J not in {stored}\nRun with --help\n"),
            "--weights: \\x1B[2J not in {stored}\nRun with --help\n");
  const std::string many(100000, '\a');
  const std::string cut = escape_untrusted_lines(many);
  EXPECT_LT(cut.size(), 16 * kReadableBytes + 64);
  EXPECT_EQ(cut.find('\a'), std::string::npos);
}

TEST(UntrustedText, AHugeErrorMessageKeepsItsStartAndEnd) {
  const Error error = make_error(ErrorCode::kCorruptFile, "'m.safetensors' has unexpected tensors: " +
                                                              std::string(20u << 20, 'y') + "\x1b[2J; check the file");
  const std::string shown = error.to_string();
  EXPECT_LT(shown.size(), 8192u);
  EXPECT_EQ(shown.rfind("corrupt file: 'm.safetensors' has unexpected tensors: yyy", 0), 0u) << shown.substr(0, 80);
  EXPECT_NE(shown.find("bytes of this message left out"), std::string::npos);
  EXPECT_NE(shown.find("\\x1B[2J; check the file"), std::string::npos);
  EXPECT_TRUE(printable(shown));
}

}  // namespace
}  // namespace cubeforge
