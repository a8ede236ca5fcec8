// Half-precision conversions: exact widening, round-to-nearest-even narrowing.
#include <gtest/gtest.h>

#include <cmath>

#include "inference/tensor/dtype.h"

namespace cubeforge {
namespace {

TEST(DType, F16RoundTripsEveryValue) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = f16_to_f32(uint16_t(bits));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), bits) << "bits " << bits;
  }
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // rounds to infinity
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
}

TEST(DType, Bf16WideningIsExactAndNarrowingRoundsToEven) {
  for (uint32_t bits = 0; bits < 65536; bits += 7) {
    const float f = bf16_to_f32(uint16_t(bits));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16(f), bits);
  }
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: even stays
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: rounds up to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(dtype_from_name("BF16"), DType::kBF16);
  EXPECT_FALSE(dtype_from_name("bf16").has_value());
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_name(DType::kF16), "F16");
}

}  // namespace
}  // namespace cubeforge
