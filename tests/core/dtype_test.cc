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

}  // namespace
}  // namespace strata
