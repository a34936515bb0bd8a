// The 4-bit KV cache writer and row reader against kernels/kv_q4_format.h, rule by rule.
#include "kernels/cpu/kv_q4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/half.h"

namespace strata::kernels::cpu {
namespace {

TEST(HalfTest, RoundsToNearestEvenAndWidensExactly) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(1e6f), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(1.0f + 1.0f / 2048), 0x3C00);  // tie goes to even
  EXPECT_EQ(FloatToHalfBits(1.0f + 3.0f / 2048), 0x3C02);  // tie goes to even
  EXPECT_EQ(FloatToHalfBits(5.96046448e-8f), 0x0001);      // smallest subnormal
  EXPECT_EQ(HalfBitsToFloat(0x0001), 5.96046448e-8f);
  EXPECT_EQ(HalfBitsToFloat(0x3555), 0.333251953125f);
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite positive half round-trips
    ASSERT_EQ(FloatToHalfBits(HalfBitsToFloat(static_cast<uint16_t>(h))), h);
  }
}

// Codes of a group computed straight from the format's formulas.
std::vector<int> FormatCodes(const std::vector<float>& x, float* scale, float* minimum) {
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  *scale = RoundToHalf((hi - lo) / 15.0f);
  *minimum = RoundToHalf(lo);
  std::vector<int> q(x.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    if (*scale != 0) {
      q[i] = static_cast<int>(std::clamp(std::nearbyint((x[i] - *minimum) / *scale), 0.0f, 15.0f));
    }
  }
  return q;
}

TEST(KvQ4Test, GroupFollowsTheFormat) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.3f, 2.0f);
  for (int g : {2, 16, 32, 64}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(static_cast<size_t>(g));
      for (float& v : x) v = normal(rng);
      std::vector<uint8_t> codes(static_cast<size_t>(g / 2));
      uint16_t params[2];
      QuantizeQ4Group(x.data(), g, codes.data(), params);
      float scale, minimum;
      const std::vector<int> q = FormatCodes(x, &scale, &minimum);
      EXPECT_EQ(params[0], FloatToHalfBits(scale));
      EXPECT_EQ(params[1], FloatToHalfBits(minimum));
      for (int j = 0; j < g / 2; ++j) {  // byte j: element j low, element j + g/2 high
        ASSERT_EQ(codes[j] & 0xF, q[j]) << "g=" << g << " j=" << j;
        ASSERT_EQ(codes[j] >> 4, q[j + g / 2]) << "g=" << g << " j=" << j;
      }
    }
  }
}

TEST(KvQ4Test, ParamsAreRoundedToHalfBeforeTheCodes) {
  // lo = 0.1 is not a half; its rounding 0.0999755859375 is what the codes are relative to, and
  // (x - minimum) / scale must use the rounded scale too.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.1f + 0.01f * i;
  std::vector<uint8_t> codes(32);
  uint16_t params[2];
  QuantizeQ4Group(x.data(), 64, codes.data(), params);
  const float scale = HalfBitsToFloat(params[0]), minimum = HalfBitsToFloat(params[1]);
  EXPECT_EQ(minimum, RoundToHalf(0.1f));
  EXPECT_NE(minimum, 0.1f);
  EXPECT_EQ(scale, RoundToHalf((x[63] - x[0]) / 15.0f));
  std::vector<float> back(64);
  DequantizeQ4Row(codes.data(), params, 64, back.data());
  for (int i = 0; i < 64; ++i) {
    const int code = i < 32 ? codes[i] & 0xF : codes[i - 32] >> 4;
    EXPECT_EQ(back[i], code * scale + minimum);
    EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * scale + 1e-3f);
  }
}

TEST(KvQ4Test, ConstantGroupKeepsItsValue) {
  for (float c : {0.0f, 3.0f, -1.25f}) {
    std::vector<float> x(64, c);
    std::vector<uint8_t> codes(32, 0xAB);
    uint16_t params[2];
    QuantizeQ4Group(x.data(), 64, codes.data(), params);
    EXPECT_EQ(HalfBitsToFloat(params[0]), 0.0f);
    for (uint8_t b : codes) EXPECT_EQ(b, 0);
    std::vector<float> back(64);
    DequantizeQ4Row(codes.data(), params, 64, back.data());
    for (float v : back) EXPECT_EQ(v, c);
  }
}

TEST(KvQ4Test, RoundTripErrorIsHalfAStep) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int d : {32, 64, 80, 96, 128, 256}) {
    std::vector<float> x(static_cast<size_t>(d)), back(static_cast<size_t>(d));
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> codes(static_cast<size_t>(Q4CodeBytes(d)));
    std::vector<uint16_t> params(static_cast<size_t>(Q4ParamHalves(d)));
    QuantizeQ4Row(x.data(), d, codes.data(), params.data());
    DequantizeQ4Row(codes.data(), params.data(), d, back.data());
    const int g = Q4Group(d);
    for (int i = 0; i < d; ++i) {
      const float scale = HalfBitsToFloat(params[2 * (i / g)]);
      // Half a step, plus what rounding minimum and scale to fp16 can add at the ends.
      EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * scale + 16 * 1e-3f * std::fabs(x[i]) + 1e-3f);
    }
  }
}

// head_dim 80 and 96: a group of 64 at bytes 0..31 and params 0..1, then one of 16 or 32 at
// bytes 32.. (element 64 + j low, 64 + (d - 64) / 2 + j high) and params 2..3.
TEST(KvQ4Test, ShortLastGroupFollowsTheFormat) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.3f, 2.0f);
  for (int d : {80, 96}) {
    ASSERT_EQ(Q4ParamHalves(d), 4);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(d));
      for (float& v : x) v = normal(rng);
      std::vector<uint8_t> codes(static_cast<size_t>(Q4CodeBytes(d)));
      uint16_t params[4];
      QuantizeQ4Row(x.data(), d, codes.data(), params);
      for (int i = 0; i < 2; ++i) {
        const int first = 64 * i, g = i == 0 ? 64 : d - 64;
        float scale, minimum;
        const std::vector<int> q = FormatCodes(
            std::vector<float>(x.begin() + first, x.begin() + first + g), &scale, &minimum);
        EXPECT_EQ(params[2 * i], FloatToHalfBits(scale)) << "d=" << d << " group " << i;
        EXPECT_EQ(params[2 * i + 1], FloatToHalfBits(minimum)) << "d=" << d << " group " << i;
        for (int j = 0; j < g / 2; ++j) {
          ASSERT_EQ(codes[32 * i + j] & 0xF, q[j]) << "d=" << d << " group " << i << " j=" << j;
          ASSERT_EQ(codes[32 * i + j] >> 4, q[j + g / 2])
              << "d=" << d << " group " << i << " j=" << j;
        }
      }
      std::vector<float> back(static_cast<size_t>(d));
      DequantizeQ4Row(codes.data(), params, d, back.data());
      for (int e = 0; e < d; ++e) {
        const int i = e / 64, j = e % 64, half = (i == 0 ? 64 : d - 64) / 2;
        const uint8_t byte = codes[32 * i + j % half];
        const int code = j < half ? byte & 0xF : byte >> 4;
        const float want =
            code * HalfBitsToFloat(params[2 * i]) + HalfBitsToFloat(params[2 * i + 1]);
        ASSERT_EQ(back[e], want) << "d=" << d << " e=" << e;
      }
    }
  }
}

TEST(KvQ4Test, WriteCachePlacesRowsAndRotatesKeys) {
  const Q4CacheShape s{2, 3, 10, 64};
  const int tokens = 4, first = 5, d = 64;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(s.batch) * tokens * s.num_kv_heads * d);
  for (float& v : rows) v = normal(rng);
  const size_t slots = static_cast<size_t>(s.batch) * s.num_kv_heads * s.max_len;
  for (bool rotate : {false, true}) {
    std::vector<uint8_t> codes(slots * 32, 0x77);
    std::vector<uint16_t> params(slots * 2, 0x1234);
    WriteQ4Cache(s, rows.data(), tokens, first, rotate, codes.data(), params.data());
    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.num_kv_heads; ++h) {
        for (int slot = 0; slot < s.max_len; ++slot) {
          const size_t row = (static_cast<size_t>(b) * s.num_kv_heads + h) * s.max_len + slot;
          const int t = slot - first;
          if (t < 0 || t >= tokens) {  // untouched
            EXPECT_EQ(codes[row * 32], 0x77);
            EXPECT_EQ(params[row * 2], 0x1234);
            continue;
          }
          std::vector<float> x(
              rows.begin() + ((static_cast<size_t>(b) * tokens + t) * 3 + h) * d,
              rows.begin() + ((static_cast<size_t>(b) * tokens + t) * 3 + h + 1) * d);
          if (rotate) HadamardRotate(x.data(), 1, d);
          std::vector<uint8_t> want(32);
          uint16_t want_params[2];
          QuantizeQ4Row(x.data(), d, want.data(), want_params);
          for (int j = 0; j < 32; ++j) ASSERT_EQ(codes[row * 32 + j], want[j]);
          EXPECT_EQ(params[row * 2], want_params[0]);
          EXPECT_EQ(params[row * 2 + 1], want_params[1]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata::kernels::cpu
