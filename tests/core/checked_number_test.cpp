// Numbers from files are checked after narrowing to the type kept: a table of
// values against each type, compared with what IEEE arithmetic and the type's
// limits say (independent of the helper's own code paths), and the messages
// name the file, the field, the value as written and the accepted range.
#include "inference/core/checked_number.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace cubeforge {
namespace {

const NumberSource kSource{"model/clip/config.json", "text_config.layer_norm_eps"};

// Whether `text` is a positive normal float, by the C library's strtof and
// fpclassify: the reference the helper is checked against.
bool is_positive_normal_float(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno == 0 && std::fpclassify(value) == FP_NORMAL && value > 0;
}

TEST(CheckedNumber, PositiveNormalFloatsAreExactlyWhatStrtofAndFpclassifyCallSo) {
  const std::vector<std::string> texts = {
      "1e-05", "1", "0.5", "3.4e38", "1.17549435e-38", "1.1754942e-38", "1e-38", "1e-40", "1e-45", "1e-46",
      "1e-256", "1e-0256", "0", "-0", "-1e-06", "3.5e38", "1e39", "1e400", "-1e400", "1e-400", "nan", "inf",
      "-inf", "18446744073709551616", "7"};
  constexpr NumberRange<float> positive = positive_up_to(FLT_MAX);
  for (const std::string& text : texts) {
    const auto narrowed = narrow_number_text<float>(text, positive, kSource);
    EXPECT_EQ(narrowed.ok(), is_positive_normal_float(text)) << text;
    if (narrowed.ok()) {
      EXPECT_EQ(*narrowed, std::strtof(text.c_str(), nullptr)) << text;
    }
  }
}

TEST(CheckedNumber, EachWayOfFailingIsSaid) {
  struct Case {
    std::string text, says;
  };
  const NumberRange<float> eps = positive_up_to(1.0f);
  for (const Case& c : std::vector<Case>{
           {"1e-0256", "underflows to 0 as a 32-bit float"},
           {"1e-40", "is a denormal as a 32-bit float"},
           {"3.5e38", "overflows a 32-bit float"},
           {"1e400", "overflows even a 64-bit float"},
           {"1e-400", "underflows to 0 even as a 64-bit float"},
           {".inf", "is infinite"},
           {"-.inf", "is infinite"},
           {".nan", "is not a number (NaN)"},
           {"2", "is outside the accepted range"},
           {"0", "is outside the accepted range"},
           {"0x10", "is not a number"},
           {"", "is not a number"},
       }) {
    auto narrowed = narrow_number_text<float>(c.text, eps, kSource);
    ASSERT_FALSE(narrowed.ok()) << c.text;
    const std::string& message = narrowed.error().message;
    EXPECT_NE(message.find(c.says), std::string::npos) << c.text << ": " << message;
    EXPECT_NE(message.find("'model/clip/config.json': text_config.layer_norm_eps = " + c.text), std::string::npos)
        << message;
    EXPECT_NE(message.find("it must be a number from 1.17549435e-38 (the smallest normal 32-bit float) to 1"),
              std::string::npos)
        << message;
    EXPECT_EQ(narrowed.error().code, ErrorCode::kCorruptFile);
  }
}

TEST(CheckedNumber, DoublesAreCheckedAsTheTypeKeptNotAsRead) {
  const NumberRange<float> any_float;
  EXPECT_FALSE(narrow_number<float>(1e-256, any_float, kSource).ok());  // a positive double, 0 as a float
  EXPECT_FALSE(narrow_number<float>(1e-40, any_float, kSource).ok());
  EXPECT_FALSE(narrow_number<float>(3e39, any_float, kSource).ok());
  EXPECT_FALSE(narrow_number<float>(std::nan(""), any_float, kSource).ok());
  EXPECT_TRUE(narrow_number<float>(0.0, any_float, kSource).ok());      // zero written as zero is no underflow
  EXPECT_TRUE(narrow_number<float>(-3e38, any_float, kSource).ok());
  EXPECT_TRUE(narrow_number<double>(1e-256, NumberRange<double>{}, kSource).ok());
  EXPECT_FALSE(narrow_number<double>(1e-310, NumberRange<double>{}, kSource).ok());  // a denormal double
  auto any = narrow_number<float>(1e-40, any_float, kSource);
  EXPECT_NE(any.error().message.find("a finite number that fits a 32-bit float (0 or normal, not a denormal)"),
            std::string::npos)
      << any.error().message;
}

TEST(CheckedNumber, WholeNumbersAreExactAndFitTheirType) {
  const NumberRange<int> size = positive_up_to(1 << 24);
  EXPECT_EQ(*narrow_number_text<int>("16777216", size, kSource), 1 << 24);
  EXPECT_EQ(*narrow_number_text<int>("1e3", size, kSource), 1000);
  for (const char* text : {"16777217", "0", "-1", "1.5", "2147483648", "1e300", "nan", "4294967297"}) {
    auto narrowed = narrow_number_text<int>(text, size, kSource);
    ASSERT_FALSE(narrowed.ok()) << text;
    EXPECT_NE(narrowed.error().message.find("it must be a whole number from 1 to 16777216"), std::string::npos)
        << narrowed.error().message;
  }
  EXPECT_NE(narrow_number_text<int>("1.5", size, kSource).error().message.find("is not a whole number"),
            std::string::npos);
  EXPECT_NE(narrow_number_text<int>("2147483648", size, kSource).error().message.find("does not fit a 32-bit integer"),
            std::string::npos);
  // 64-bit whole numbers are read exactly, not through a double.
  const NumberRange<uint64_t> seed;
  EXPECT_EQ(*narrow_number_text<uint64_t>("18446744073709551615", seed, kSource), UINT64_MAX);
  EXPECT_EQ(*narrow_number_text<uint64_t>("9007199254740993", seed, kSource), 9007199254740993ull);
  EXPECT_FALSE(narrow_number_text<uint64_t>("18446744073709551616", seed, kSource).ok());
  EXPECT_FALSE(narrow_number_text<uint64_t>("-1", seed, kSource).ok());
  EXPECT_EQ(*narrow_number<int64_t>(uint64_t(INT64_MAX), NumberRange<int64_t>{}, kSource), INT64_MAX);
  EXPECT_FALSE(narrow_number<int64_t>(uint64_t(INT64_MAX) + 1, NumberRange<int64_t>{}, kSource).ok());
  EXPECT_FALSE(narrow_number<int>(int64_t(INT32_MIN) - 1, NumberRange<int>{}, kSource).ok());
  EXPECT_FALSE(narrow_number<int64_t>(9.3e18, NumberRange<int64_t>{}, kSource).ok());  // above 2^63
}

TEST(CheckedNumber, AHugeValueIsQuotedCutAndWithoutControlCharacters) {
  const std::string huge = std::string(1 << 20, '9') + "\x1b[2J";
  auto narrowed = narrow_number_text<int>(huge, positive_up_to(8), kSource);
  ASSERT_FALSE(narrowed.ok());
  EXPECT_LT(narrowed.error().message.size(), 1024u);
  EXPECT_NE(narrowed.error().message.find("bytes in all"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
