#include "kernels/cpu/weight_q4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/kv_q4.h"

namespace strata::kernels::cpu {
namespace {

constexpr long kRows = 37, kCols = 192;

std::vector<float> RandomWeight(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(kRows * kCols));
  for (float& x : w) x = normal(rng);
  return w;
}

// w [kRows, kCols] quantized in groups of `group`, and its expansion.
struct RoundTrip {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> params;
  std::vector<float> out;
};

RoundTrip Quantized(const std::vector<float>& w, int group) {
  RoundTrip t{std::vector<uint8_t>(WeightQ4CodeBytes(kRows, kCols)),
              std::vector<uint16_t>(WeightQ4ParamHalves(kRows, kCols, group)),
              std::vector<float>(w.size())};
  QuantizeWeightQ4(WeightQ4Source::kF32, w.data(), kRows, kCols, group, t.codes.data(),
                   t.params.data());
  ExpandWeightQ4(t.codes.data(), t.params.data(), kRows, kCols, group, t.out.data());
  return t;
}

TEST(WeightQ4Test, GroupsAreKvCacheGroupsAlongTheInputDim) {
  for (const int group : {64, 32}) {
    std::vector<float> w = RandomWeight(1);
    for (int i = 0; i < group; ++i) w[group + i] = 0.25f;  // a constant group: max == min
    const auto [codes, params, out] = Quantized(w, group);
    const long groups = kCols / group;
    for (long r = 0; r < kRows; ++r) {
      for (long g = 0; g < groups; ++g) {
        uint8_t want_codes[32];
        uint16_t want_params[2];
        // A KV cache row of head_dim `group` is one group of that size.
        QuantizeQ4Group(w.data() + r * kCols + g * group, group, want_codes, want_params);
        ASSERT_EQ(std::memcmp(want_codes, codes.data() + (r * kCols + g * group) / 2, group / 2),
                  0);
        ASSERT_EQ(params[2 * (r * groups + g)], want_params[0]);
        ASSERT_EQ(params[2 * (r * groups + g) + 1], want_params[1]);
        float want[64];
        DequantizeQ4Row(want_codes, want_params, group, want);
        for (int i = 0; i < group; ++i) ASSERT_EQ(out[r * kCols + g * group + i], want[i]);
      }
    }
    for (int i = 0; i < group; ++i) EXPECT_EQ(out[group + i], 0.25f) << group;
  }
}

TEST(WeightQ4Test, HalfAndBf16SourcesQuantizeTheirFloatValues) {
  const std::vector<float> w = RandomWeight(2);
  std::vector<uint16_t> f16(w.size()), bf16(w.size());
  std::vector<float> f16_as_float(w.size()), bf16_as_float(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    f16[i] = FloatToHalfBits(w[i]);
    f16_as_float[i] = HalfBitsToFloat(f16[i]);
    uint32_t bits;
    std::memcpy(&bits, &w[i], 4);
    bf16[i] = static_cast<uint16_t>(bits >> 16);
    bits = static_cast<uint32_t>(bf16[i]) << 16;
    std::memcpy(&bf16_as_float[i], &bits, 4);
  }
  const struct {
    WeightQ4Source type;
    const void* data;
    const std::vector<float>& as_float;
  } cases[] = {{WeightQ4Source::kF16, f16.data(), f16_as_float},
               {WeightQ4Source::kBF16, bf16.data(), bf16_as_float}};
  for (const auto& c : cases) {
    std::vector<uint8_t> codes(WeightQ4CodeBytes(kRows, kCols)), want_codes(codes.size());
    std::vector<uint16_t> params(WeightQ4ParamHalves(kRows, kCols, kWeightQ4Group));
    std::vector<uint16_t> want_params(params.size());
    QuantizeWeightQ4(c.type, c.data, kRows, kCols, kWeightQ4Group, codes.data(), params.data());
    QuantizeWeightQ4(WeightQ4Source::kF32, c.as_float.data(), kRows, kCols, kWeightQ4Group,
                     want_codes.data(), want_params.data());
    EXPECT_EQ(codes, want_codes);
    EXPECT_EQ(params, want_params);
  }
}

TEST(WeightQ4Test, ExpansionErrorIsHalfAStep) {
  const std::vector<float> w = RandomWeight(3);
  for (const int group : {64, 32}) {
    const auto [codes, params, out] = Quantized(w, group);
    for (long r = 0; r < kRows; ++r) {
      for (long i = 0; i < kCols; ++i) {
        const float scale = HalfBitsToFloat(params[2 * (r * (kCols / group) + i / group)]);
        EXPECT_LE(std::fabs(out[r * kCols + i] - w[r * kCols + i]), 0.5f * scale + 1e-4f);
      }
    }
  }
  EXPECT_FALSE(WeightQ4Supports(100, 64));
  EXPECT_TRUE(WeightQ4Supports(576, 64));
  EXPECT_FALSE(WeightQ4Supports(48, 32));
  EXPECT_TRUE(WeightQ4Supports(96, 32));
}

}  // namespace
}  // namespace strata::kernels::cpu
