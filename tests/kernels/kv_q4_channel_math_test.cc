// The __host__ __device__ arithmetic of the default-format CUDA decode kernel
// (kernels/kv_q4_channel_math.h), run here on the CPU against fp64 and against the CPU kernels'
// own reader and writer: fp16 conversions, the magic-number unpack, the nibble-to-channel maps of
// the MMA fragments, the split query and key scale folding, the log-sum-exp merge, the
// shared-memory swizzle and the wave model.
#include "kernels/kv_q4_channel_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::q4c {
namespace {

TEST(KvQ4ChannelMathTest, HalfConversionsMatchTheCpuKernels) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = HalfBitsToFloat(static_cast<uint16_t>(h));
    const float b = cpu::HalfBitsToFloat(static_cast<uint16_t>(h));
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    ASSERT_EQ(x, y) << "half bits " << h;
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    ASSERT_EQ(FloatToHalfBits(f), cpu::FloatToHalfBits(f)) << "float bits " << bits;
  }
}

TEST(KvQ4ChannelMathTest, MagicNumberUnpackGivesTheNibblesExactly) {
  std::mt19937 rng(9);
  for (int i = 0; i < 4096; ++i) {
    const uint32_t w = rng();
    for (int shift : {0, 4, 8, 12}) {
      const uint32_t pair = NibblePairPlus1024(w, shift);
      const double lo = HalfBitsToFloat(static_cast<uint16_t>(pair & 0xFFFF)) - 1024.0;
      const double hi = HalfBitsToFloat(static_cast<uint16_t>(pair >> 16)) - 1024.0;
      EXPECT_EQ(lo, static_cast<double>((w >> shift) & 0xF));
      EXPECT_EQ(hi, static_cast<double>((w >> (shift + 16)) & 0xF));
    }
  }
}

// The values' high nibbles come out as 16·n and meet scale / 16 in the HFMA2, so the product is
// n·scale exactly whenever scale / 16 is itself an fp16 number (every scale of at least 2^-10).
TEST(KvQ4ChannelMathTest, TimesSixteenUnpackAndScaleAreExact) {
  std::mt19937 rng(10);
  for (int i = 0; i < 4096; ++i) {
    const uint32_t w = rng();
    for (int shift : {4, 8, 12}) {
      const uint32_t pair = NibblePairTimes16Plus1024(w, shift);
      const double lo = HalfBitsToFloat(static_cast<uint16_t>(pair & 0xFFFF)) - 1024.0;
      const double hi = HalfBitsToFloat(static_cast<uint16_t>(pair >> 16)) - 1024.0;
      EXPECT_EQ(lo, 16.0 * ((w >> shift) & 0xF));
      EXPECT_EQ(hi, 16.0 * ((w >> (shift + 16)) & 0xF));
    }
  }
  for (uint32_t h = 0x1400; h < 0x7C00; ++h) {  // 2^-10 up to the largest finite fp16
    const float scale = HalfBitsToFloat(static_cast<uint16_t>(h));
    const uint16_t sixteenth = FloatToHalfBits(scale * 0.0625f);
    ASSERT_EQ(static_cast<double>(HalfBitsToFloat(sixteenth)), scale / 16.0) << "bits " << h;
  }
}

// Every channel once over a lane's fragments (keys) and over the output rows (values), and each
// nibble's channel as the CPU reader (DequantizeKeyByChannel with unit params) sees it.
TEST(KvQ4ChannelMathTest, FragmentMapsCoverEveryChannelOnceAsTheCpuReaderSees) {
  std::mt19937 rng(3);
  for (int d : {64, 128, 256}) {
    std::vector<int> key_hits(d, 0), value_hits(d, 0);
    for (int c = 0; c < d / 32; ++c) {
      for (int t = 0; t < 4; ++t) {
        for (int k = 0; k < 4; ++k) {
          for (int hi = 0; hi < 2; ++hi) ++key_hits[KeyChannel(c, t, k, hi, d)];
        }
      }
    }
    for (int m = 0; m < d / 16; ++m) {
      for (int upper = 0; upper < 2; ++upper) {
        for (int g = 0; g < 8; ++g) ++value_hits[ValueDim(m, upper, g, d)];
      }
    }
    for (int c = 0; c < d; ++c) {
      EXPECT_EQ(key_hits[c], 1) << "d=" << d << " channel " << c;
      EXPECT_EQ(value_hits[c], 1) << "d=" << d << " dim " << c;
    }
    // Consecutive k slots of a key fragment are consecutive channels (one 16-byte q load).
    for (int c = 0; c < d / 32; ++c) {
      for (int t = 0; t < 4; ++t) {
        for (int k = 1; k < 4; ++k)
          EXPECT_EQ(KeyChannel(c, t, k, 0, d), KeyChannel(c, t, 0, 0, d) + k);
      }
    }
    std::vector<uint8_t> codes(d / 2);
    for (uint8_t& b : codes) b = static_cast<uint8_t>(rng());
    std::vector<uint16_t> unit(2 * d);
    for (int c = 0; c < d; ++c) {
      unit[2 * c] = cpu::FloatToHalfBits(1.0f);
      unit[2 * c + 1] = 0;
    }
    std::vector<float> x(d);
    cpu::DequantizeKeyByChannel(codes.data(), unit.data(), d, x.data());
    for (int byte = 0; byte < d / 2; ++byte) {
      EXPECT_EQ(x[ChannelOfNibble(byte, 0, d)], codes[byte] & 0xF);
      EXPECT_EQ(x[ChannelOfNibble(byte, 1, d)], codes[byte] >> 4);
    }
  }
}

// Head sizes 80 and 96 (a last group of 16 or 32 channels; at 80 the third 16-byte chunk of a code
// row is half padding): the maps cover every channel of the padded chunks once, the real ones as
// kernels/kv_q4_format.h lays them out (byte 32i + j of group i, g channels, holds 64i + j and
// 64i + g/2 + j), the padding past head_dim, and a key fragment's k slots stay consecutive.
TEST(KvQ4ChannelMathTest, FragmentMapsCoverTheShorterLastGroupAndThePadding) {
  for (int d : {80, 96}) {
    const int chunks = CodeChunks(d);
    EXPECT_EQ(chunks, 3);
    const int padded = 32 * chunks;
    std::vector<int> key_hits(padded, 0), value_hits(padded, 0);
    for (int c = 0; c < chunks; ++c) {
      for (int t = 0; t < 4; ++t) {
        for (int hi = 0; hi < 2; ++hi) {
          for (int k = 0; k < 4; ++k) {
            const int ch = KeyChannel(c, t, k, hi, d);
            ASSERT_GE(ch, 0);
            ASSERT_LT(ch, padded);
            ++key_hits[ch];
            EXPECT_EQ(ch, KeyChannel(c, t, 0, hi, d) + k) << "d=" << d;
          }
          EXPECT_EQ(KeyChannel(c, t, 0, hi, d) % 4, 0) << "16-byte aligned params";
        }
      }
    }
    for (int m = 0; m < 2 * chunks; ++m) {
      for (int upper = 0; upper < 2; ++upper) {
        for (int g = 0; g < 8; ++g) ++value_hits[ValueDim(m, upper, g, d)];
      }
    }
    for (int c = 0; c < padded; ++c) {
      EXPECT_EQ(key_hits[c], 1) << "d=" << d << " channel " << c;
      EXPECT_EQ(value_hits[c], 1) << "d=" << d << " dim " << c;
    }
    for (int byte = 0; byte < d / 2; ++byte) {
      const int group = byte / 32;
      const int g = std::min(64, d - 64 * group);
      const int j = byte - 32 * group;
      ASSERT_LT(j, g / 2);
      EXPECT_EQ(ChannelOfNibble(byte, 0, d), 64 * group + j) << "d=" << d << " byte " << byte;
      EXPECT_EQ(ChannelOfNibble(byte, 1, d), 64 * group + g / 2 + j) << "d=" << d;
    }
    for (int byte = d / 2; byte < 16 * chunks; ++byte) {
      EXPECT_GE(ChannelOfNibble(byte, 0, d), d);
      EXPECT_GE(ChannelOfNibble(byte, 1, d), d);
    }
    EXPECT_EQ(Q4ParamHalves(d), 4);
    EXPECT_EQ(Q4ChannelParamHalves(d) * kQ4ChannelGroup, 2 * padded) << "params fill the slots";
  }
  // The sizes every other head_dim had before 80 and 96 were defined.
  for (int d : {16, 32, 48, 64, 128, 192, 256}) {
    EXPECT_EQ(Q4ParamHalves(d), d / Q4Group(d) * 2) << d;
    EXPECT_EQ(Q4ChannelParamHalves(d), (2 * d + kQ4ChannelGroup - 1) / kQ4ChannelGroup) << d;
  }
}

// RoundToHalfBits (the host's model of one fp16 rounding of a multiply or FMA) agrees with
// FloatToHalfBits on every float it is given as a double, and rounds exact midpoints to even.
TEST(KvQ4ChannelMathTest, DoubleToHalfRoundingMatchesFloatRounding) {
  std::mt19937 rng(31);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(RoundToHalfBits(static_cast<double>(f)), FloatToHalfBits(f)) << "float bits " << bits;
  }
  for (uint32_t h = 1; h < 0x7BFF; ++h) {  // the midpoint above each finite positive fp16
    const double lo = HalfBitsToFloat(static_cast<uint16_t>(h));
    const double hi = HalfBitsToFloat(static_cast<uint16_t>(h + 1));
    const uint16_t even = (h & 1u) == 0 ? static_cast<uint16_t>(h) : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(RoundToHalfBits(0.5 * (lo + hi)), even) << "half bits " << h;
    ASSERT_EQ(RoundToHalfBits(-0.5 * (lo + hi)), even | 0x8000u) << "half bits " << h;
  }
  EXPECT_EQ(RoundToHalfBits(65519.0), 0x7BFFu);
  EXPECT_EQ(RoundToHalfBits(65520.0), 0x7C00u);
  EXPECT_EQ(RoundToHalfBits(std::ldexp(1.0, -25)), 0u);  // tie to even: 0
  EXPECT_EQ(RoundToHalfBits(std::ldexp(1.5, -25)), 1u);  // above the tie
}

// The query's fp16 hi + lo holds q to 2^-22·|q| (2^-25 absolute where lo is subnormal), and the
// split fold fp16(hi·scale + fp16(lo·scale)) is within one fp16 rounding of q·scale (fp64; plus
// scale·2^-25 for q below the fp16 normals), the
// sixteenth exactly that divided by 16 wherever the quotient is a normal fp16 number.
TEST(KvQ4ChannelMathTest, SplitFoldIsOneRoundingOfTheProduct) {
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  int same_as_one_rounding = 0, total = 0;
  for (int i = 0; i < 200000; ++i) {
    const float q =
        (rng() % 2 ? -1.0f : 1.0f) * std::ldexp(mant(rng), static_cast<int>(rng() % 30) - 15);
    const uint16_t scale =
        static_cast<uint16_t>(0x0400u + rng() % (0x6000u - 0x0400u));  // 2^-14 .. 512
    uint16_t hi, lo;
    SplitQueryHalf(q, hi, lo);
    const double sum = static_cast<double>(HalfBitsToFloat(hi)) + HalfBitsToFloat(lo);
    ASSERT_LE(std::abs(sum - q),
              std::ldexp(std::abs(static_cast<double>(q)), -22) + std::ldexp(1.0, -25))
        << "q " << q;
    const double s = HalfBitsToFloat(scale);
    const double exact = static_cast<double>(q) * s;
    if (std::abs(exact) >= 65000.0) continue;
    const uint32_t pair_scale = scale | static_cast<uint32_t>(scale) << 16;
    const uint32_t folded = FoldKeyPairSplit<false>(
        hi | static_cast<uint32_t>(hi) << 16, lo | static_cast<uint32_t>(lo) << 16, pair_scale);
    ASSERT_EQ(folded & 0xFFFFu, folded >> 16);
    const double got = HalfBitsToFloat(static_cast<uint16_t>(folded & 0xFFFFu));
    // Below 2^-14 the split itself holds q only to 2^-25 absolute: scale·2^-25 more.
    ASSERT_LE(std::abs(got - exact),
              std::ldexp(std::abs(exact), -11) * (1.0 + std::ldexp(1.0, -10)) + std::ldexp(s, -25) +
                  std::ldexp(1.0, -24))
        << "q " << q << " scale bits " << scale;
    if (std::abs(q) >= std::ldexp(1.0f, -14) && std::abs(exact) >= std::ldexp(1.0, -14)) {
      ++total;
      same_as_one_rounding += RoundToHalfBits(exact) == static_cast<uint16_t>(folded & 0xFFFFu);
    }
    const uint32_t sixteenth = FoldKeyPairSplit<true>(
        hi | static_cast<uint32_t>(hi) << 16, lo | static_cast<uint32_t>(lo) << 16, pair_scale);
    const double sx = HalfBitsToFloat(static_cast<uint16_t>(sixteenth & 0xFFFFu));
    if (std::abs(got) / 16.0 >= std::ldexp(1.0, -14)) {
      ASSERT_EQ(sx, got / 16.0) << "q " << q << " scale bits " << scale;
    } else {
      ASSERT_LE(std::abs(sx - got / 16.0), std::ldexp(1.0, -25));
    }
  }
  // Among normal numbers it differs from one rounding only near midpoints (wider ones where lo is
  // subnormal, |q| < 2^-3): about 2% of these draws.
  EXPECT_GE(same_as_one_rounding, total - total / 20) << total;
}

// q·k over a key group written by the CPU writer, as the device forms it: the query split into
// fp16 hi + lo, the split fold (the high nibbles' codes as 16·n against the fold / 16), the bias
// as fp32 sums of the exact fp16 products minimum·hi and minimum·lo, against fp64
// q·(n·scale + minimum).
TEST(KvQ4ChannelMathTest, FoldedScoresMatchFp64) {
  constexpr int kC = kQ4ChannelGroup;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int d : {64, 128, 256}) {
    std::vector<float> keys(static_cast<size_t>(kC) * d);
    std::vector<float> mean(d), spread(d);
    for (int c = 0; c < d; ++c) {
      mean[c] = c % 9 == 0 ? 20.0f * normal(rng) : 0.5f * normal(rng);
      spread[c] = c % 7 == 0 ? 8.0f : 0.3f;
    }
    for (int j = 0; j < kC; ++j) {
      for (int c = 0; c < d; ++c) keys[j * d + c] = mean[c] + spread[c] * normal(rng);
    }
    std::vector<const float*> rows(kC);
    for (int j = 0; j < kC; ++j) rows[j] = j == 0 ? nullptr : keys.data() + j * d;  // a sink
    std::vector<uint8_t> codes(static_cast<size_t>(kC) * Q4CodeBytes(d));
    std::vector<uint16_t> params(static_cast<size_t>(kC) * Q4ChannelParamHalves(d));
    cpu::QuantizeKeyGroupByChannel(rows.data(), d, codes.data(), params.data());
    std::vector<float> q(d);
    for (float& v : q) v = 0.3f * normal(rng);
    for (int j = 1; j < kC; ++j) {
      const uint8_t* row = codes.data() + static_cast<size_t>(j) * Q4CodeBytes(d);
      double ref = 0.0, mag = 0.0, dot = 0.0;
      float bias = 0.0f;
      for (int c = 0; c < d / 32; ++c) {
        for (int t = 0; t < 4; ++t) {
          for (int hi = 0; hi < 2; ++hi) {
            // Fragment slots k and k + 2 are one fp16 pair (k-indices 2t, 2t + 1 for k = 0).
            for (int k = 0; k < 2; ++k) {
              const int ch0 = KeyChannel(c, t, k, hi, d);
              const int ch1 = KeyChannel(c, t, k + 2, hi, d);
              uint16_t h0, l0, h1, l1;
              SplitQueryHalf(q[ch0], h0, l0);
              SplitQueryHalf(q[ch1], h1, l1);
              const uint32_t scale2 = params[2 * ch0] | static_cast<uint32_t>(params[2 * ch1])
                                                            << 16;
              const uint32_t hi2 = h0 | static_cast<uint32_t>(h1) << 16;
              const uint32_t lo2 = l0 | static_cast<uint32_t>(l1) << 16;
              const uint32_t folded = hi ? FoldKeyPairSplit<true>(hi2, lo2, scale2)
                                         : FoldKeyPairSplit<false>(hi2, lo2, scale2);
              for (int e = 0; e < 2; ++e) {
                const int ch = e == 0 ? ch0 : ch1;
                const int byte = 16 * c + 4 * t + k + 2 * e;
                const int n = hi ? row[byte] >> 4 : row[byte] & 0xF;
                const double operand = HalfBitsToFloat(static_cast<uint16_t>(folded >> (16 * e)));
                dot += operand * (hi ? 16 * n : n);
                const float minimum = HalfBitsToFloat(params[2 * ch + 1]);
                bias += minimum * HalfBitsToFloat(e == 0 ? h0 : h1);  // exact fp16 products
                bias += minimum * HalfBitsToFloat(e == 0 ? l0 : l1);
                const double kv = n * static_cast<double>(cpu::HalfBitsToFloat(params[2 * ch])) +
                                  cpu::HalfBitsToFloat(params[2 * ch + 1]);
                ref += static_cast<double>(q[ch]) * kv;
                mag += std::abs(static_cast<double>(q[ch]) * kv);
              }
            }
          }
        }
      }
      const double got = dot + bias;
      EXPECT_LE(std::abs(got - ref), 1e-3 * mag + 1e-6) << "d=" << d << " token " << j;
    }
  }
}

// A softmax-weighted average split into parts (some empty), each run by OnlineRescale over
// blocks, merged by MergeParts: against fp64 over all scores at once.
TEST(KvQ4ChannelMathTest, LogSumExpMergeMatchesFp64) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 300);
    const float spread = trial % 3 == 0 ? 30.0f : 3.0f;
    std::vector<float> s(n), v(n);
    for (int i = 0; i < n; ++i) {
      s[i] = spread * normal(rng);
      v[i] = normal(rng);
    }
    double top = -INFINITY;
    for (float x : s) top = std::max<double>(top, x);
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; ++i) {
      const double w = std::exp2(s[i] - top);
      num += w * v[i];
      den += w;
    }
    const double ref = num / den;
    const double ref_lse = top + std::log2(den);
    // Cut points, with empty parts allowed.
    const int parts = 1 + static_cast<int>(rng() % 6);
    std::vector<int> cuts{0, n};
    for (int p = 1; p < parts; ++p) cuts.push_back(static_cast<int>(rng() % (n + 1)));
    std::sort(cuts.begin(), cuts.end());
    std::vector<float> lse, out;
    for (size_t p = 0; p + 1 < cuts.size(); ++p) {
      SoftmaxRun run;
      float acc = 0.0f;
      const int block = 1 + static_cast<int>(rng() % 40);
      for (int b0 = cuts[p]; b0 < cuts[p + 1]; b0 += block) {
        const int b1 = std::min(cuts[p + 1], b0 + block);
        float block_max = -INFINITY;
        for (int i = b0; i < b1; ++i) block_max = std::max(block_max, s[i]);
        float use;
        acc *= OnlineRescale(run, block_max, use);
        for (int i = b0; i < b1; ++i) {
          const float w = exp2f(s[i] - use);
          run.l += w;
          acc += w * v[i];
        }
      }
      lse.push_back(RunLse(run));
      out.push_back(run.l > 0.0f ? acc / run.l : 0.0f);
      if (cuts[p] == cuts[p + 1]) {
        EXPECT_EQ(lse.back(), -INFINITY);
      }
    }
    const float got = MergeParts(lse.data(), out.data(), static_cast<int>(lse.size()), 1);
    EXPECT_NEAR(got, ref, 1e-5 * (1.0 + std::abs(ref))) << "trial " << trial;
    float top_lse = -INFINITY;
    double total = 0.0;
    for (float l : lse) top_lse = std::max(top_lse, l);
    for (float l : lse) total += l == -INFINITY ? 0.0 : std::exp2(static_cast<double>(l) - top_lse);
    EXPECT_NEAR(top_lse + std::log2(total), ref_lse, 1e-5 * (1.0 + std::abs(ref_lse)));
  }
  const float none[2] = {-INFINITY, -INFINITY};
  const float x[2] = {1.0f, 2.0f};
  EXPECT_EQ(MergeParts(none, x, 2, 1), 0.0f);
}

// The eight rows of one ldmatrix phase, reading the same logical chunk, hit eight different
// 16-byte bank groups; and each row's chunks stay a permutation (odd rows: in place).
TEST(KvQ4ChannelMathTest, SwizzleIsConflictFreeAndAPermutation) {
  for (int cpr : {2, 3, 4, 8}) {
    for (int base = 0; base < 32; base += 8) {
      for (int c = 0; c < cpr; ++c) {
        std::set<int> groups;
        for (int r = base; r < base + 8; ++r)
          groups.insert((r * cpr + SwizzledChunk(r, c, cpr)) % 8);
        EXPECT_EQ(groups.size(), 8u) << "chunks per row " << cpr << " base " << base;
      }
    }
    for (int r = 0; r < 32; ++r) {
      std::set<int> at;
      for (int c = 0; c < cpr; ++c) at.insert(SwizzledChunk(r, c, cpr));
      EXPECT_EQ(at.size(), static_cast<size_t>(cpr));
      EXPECT_LT(*at.rbegin(), cpr);
    }
  }
}

TEST(KvQ4ChannelMathTest, WaveModelFillsTheLastWave) {
  EXPECT_EQ(PlanSplitsByWaves(0, 264, 10), 1);
  EXPECT_EQ(PlanSplitsByWaves(264, 264, 10), 1);  // exactly one wave
  // 432 blocks on 396 slots would leave a second wave 9% full: more splits fill it.
  const int sp = PlanSplitsByWaves(432, 396, 64);
  const long blocks = 432L * sp;
  const long waves = (blocks + 395) / 396;
  EXPECT_GE(static_cast<double>(blocks) / (waves * 396.0), 0.95);
  EXPECT_GT(sp, 1);
  EXPECT_EQ(PlanSplitsByWaves(64, 264, 1), 1);   // capped by `most`
  EXPECT_EQ(PlanSplitsByWaves(64, 264, 64), 4);  // 256 of 264 slots
}

}  // namespace
}  // namespace strata::kernels::q4c
