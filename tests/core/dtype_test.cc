#include "src/core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

// Every one of the 65536 half patterns survives half -> float -> half (NaNs stay NaN).
TEST(DTypeTest, HalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "pattern " << h;
  }
}

TEST(DTypeTest, HalfKnownValues) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // rounds up to inf
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
}

// Every bf16 pattern survives bf16 -> float -> bf16; a float between two bf16 values rounds to
// the nearer, ties to even; NaN stays NaN (its payload may not survive the top 16 bits alone).
TEST(DTypeTest, Bf16RoundsToNearestEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    EXPECT_EQ(FloatToBf16(f), b) << "pattern " << b;
  }
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);        // tie: to even (1)
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);    // tie: to even (1 + 2^-6)
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -12)), 0x3F81);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("0x1")))));
}

TEST(DTypeTest, ConvertFromFloatRoundsEachType) {
  const float x[] = {1.0f, -2.5f, 1.0f + std::ldexp(1.0f, -12), 70000.0f};
  uint16_t half[4], bf16[4];
  float f32[4];
  ConvertFromFloat(DType::kF16, x, half, 4);
  ConvertFromFloat(DType::kBF16, x, bf16, 4);
  ConvertFromFloat(DType::kF32, x, f32, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(half[i], FloatToHalf(x[i]));
    EXPECT_EQ(bf16[i], FloatToBf16(x[i]));
    EXPECT_EQ(f32[i], x[i]);
  }
  float back[4];
  ConvertToFloat(DType::kF16, half, back, 4);
  EXPECT_EQ(back[2], 1.0f);  // below half's precision
  EXPECT_TRUE(std::isinf(back[3]));  // above half's range
}

}  // namespace
}  // namespace strata
