// Half-precision conversions: exact widening, round-to-nearest-even narrowing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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

// A safetensors header may leave the data section at an odd offset; widening
// must not assume alignment (UBSan reports such loads in the sanitizer build).
TEST(DType, WideningAndFiniteChecksReadAnyAlignment) {
  alignas(16) unsigned char buffer[64] = {};
  unsigned char* odd = buffer + 1;
  const uint16_t half[3] = {f32_to_f16(1.5f), f32_to_f16(-2.f), 0x7c00 /* +inf */};
  const uint16_t brain[3] = {f32_to_bf16(3.f), f32_to_bf16(-0.5f), f32_to_bf16(std::nanf(""))};
  const double wide[2] = {0.25, -8.0};
  const int64_t ids[2] = {-7, 1 << 20};
  float out[3] = {};
  std::memcpy(odd, half, sizeof half);
  convert_to_f32(DType::kF16, odd, out, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.f);
  EXPECT_EQ(find_non_finite(DType::kF16, odd, 3), 2);
  std::memcpy(odd, brain, sizeof brain);
  convert_to_f32(DType::kBF16, odd, out, 2);
  EXPECT_EQ(out[0], 3.f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(find_non_finite(DType::kBF16, odd, 3), 2);
  EXPECT_EQ(find_non_finite(DType::kBF16, odd, 2), -1);
  std::memcpy(odd, wide, sizeof wide);
  convert_to_f32(DType::kF64, odd, out, 2);
  EXPECT_EQ(out[0], 0.25f);
  EXPECT_EQ(out[1], -8.f);
  std::memcpy(odd, ids, sizeof ids);
  convert_to_f32(DType::kI64, odd, out, 2);
  EXPECT_EQ(out[0], -7.f);
  EXPECT_EQ(out[1], float(1 << 20));
}

}  // namespace
}  // namespace cubeforge
