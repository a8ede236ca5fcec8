// Unicode helpers of the CLIP tokenizer, against values printed by Python's
// unicodedata / bytes.decode("utf-8", "replace") (an independent implementation).
#include "inference/text/unicode.h"

#include <gtest/gtest.h>

namespace cubeforge::unicode {
namespace {

TEST(Utf8, ReplacesEachMaximalIllFormedSubpartOnce) {
  struct Case {
    std::string bytes;
    std::u32string expected;
  };
  const Case cases[] = {
      {"\xf0\x80", U"\uFFFD\uFFFD"},
      {"\xe2\x82", U"\uFFFD"},
      {"\xe2\x82\xac", U"\u20AC"},
      {"\xed\xa0\x80", U"\uFFFD\uFFFD\uFFFD"},  // a surrogate
      {"\xc0\xaf", U"\uFFFD\uFFFD"},            // overlong "/"
      {"\xf4\x90\x80\x80", U"\uFFFD\uFFFD\uFFFD\uFFFD"},  // above U+10FFFF
      {"a\xff" "b", U"a\uFFFDb"},
      {"\xf0\x9f\x98", U"\uFFFD"},
      {"\xf0\x9f\x98\x80", U"\U0001F600"},
      {std::string("a\0b", 3), std::u32string(U"a\0b", 3)},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(decode_utf8(c.bytes), c.expected) << "bytes of length " << c.bytes.size();
    if (c.expected.find(kReplacementCharacter) == std::u32string::npos) {
      EXPECT_EQ(encode_utf8(c.expected), c.bytes);
    }
  }
}

TEST(CharacterClasses, MatchUnicodeGeneralCategories) {
  EXPECT_TRUE(is_letter(U'a'));
  EXPECT_TRUE(is_letter(U'Z'));
  EXPECT_TRUE(is_letter(U'é'));
  EXPECT_TRUE(is_letter(U'ß'));
  EXPECT_TRUE(is_letter(U'Ж'));
  EXPECT_TRUE(is_letter(U'中'));
  EXPECT_TRUE(is_letter(U'ª'));  // Lo
  EXPECT_FALSE(is_letter(U'\u0301'));  // a combining mark is Mn, not L
  EXPECT_FALSE(is_letter(U'_'));
  EXPECT_FALSE(is_letter(U'\U0001F600'));
  EXPECT_TRUE(is_number(U'7'));
  EXPECT_TRUE(is_number(U'²'));   // No
  EXPECT_TRUE(is_number(U'Ⅻ'));  // Nl
  EXPECT_TRUE(is_number(U'٣'));   // Nd
  EXPECT_FALSE(is_number(U'a'));
  EXPECT_TRUE(is_whitespace(U'\t'));
  EXPECT_TRUE(is_whitespace(U'\u3000'));
  EXPECT_TRUE(is_whitespace(U'\u00A0'));
  EXPECT_FALSE(is_whitespace(U'\u200B'));  // zero-width space is not White_Space
}

TEST(Lowercase, FullMappingPerCharacter) {
  std::u32string out;
  for (char32_t c : std::u32string(U"ΣΑΣ İ Ǆ ÉA")) append_lowercase(c, out);
  // Per character, as the Rust normaliser maps: the final sigma stays σ.
  EXPECT_EQ(out, U"σασ i\u0307 ǆ éa");
}

TEST(Nfc, ComposesReordersAndHandlesHangul) {
  EXPECT_EQ(to_nfc(U"cafe\u0301"), U"café");
  EXPECT_EQ(to_nfc(U"A\u0308\u0301"), U"\u00C4\u0301");
  EXPECT_EQ(to_nfc(U"\u1100\u1161\u11A8"), U"\uAC01");
  EXPECT_EQ(to_nfc(U"e\u0327\u0301"), U"\u0229\u0301");
  EXPECT_EQ(to_nfc(U"q\u0307\u0323"), U"q\u0323\u0307");  // reordered by combining class
  EXPECT_EQ(to_nfc(U"\u212B"), U"\u00C5");                 // singleton decomposition (ANGSTROM SIGN)
  EXPECT_EQ(to_nfc(U"plain ascii"), U"plain ascii");
  EXPECT_EQ(to_nfc(U"\u0301leading mark"), U"\u0301leading mark");
}

}  // namespace
}  // namespace cubeforge::unicode
