// Keys by channel (kernels/cpu/kv_q4_channel.h and DecodeAttentionQ4's keys_by_channel): the
// group quantizer against the format's rule read back independently, the writer's groups the
// same bits however the tokens arrive, and decode attention on every instruction-set path of this
// CPU against an fp64 reference over the dequantized cache with its exact tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/kv_q4.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/cpu/threads.h"
#include "kernels/kv_q4_format.h"
#include "tests/kernels/q4_reference.h"

namespace strata::kernels::cpu {
namespace {

using testing::MaxRelativeError;
using testing::ReferenceDecode;
constexpr int kC = kQ4ChannelGroup;

// Channel c of a token's codes, read as the format says: group i = c / 64 of g channels (64, or
// the shorter last one) holds its element j in the low nibble of byte 32i + j and j + g/2 in the
// high nibble.
int CodeOf(const uint8_t* codes, int c, int head_dim) {
  const int i = c / 64, j = c % 64, g = std::min(64, head_dim - 64 * i);
  const uint8_t byte = codes[32 * i + j % (g / 2)];
  return j < g / 2 ? (byte & 0xF) : (byte >> 4);
}

// Keys whose channels differ in mean and spread by two orders of magnitude, as real keys do.
std::vector<float> OutlierKeys(int tokens, int head_dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> mean(head_dim), spread(head_dim);
  for (int c = 0; c < head_dim; ++c) {
    mean[c] = c % 9 == 0 ? 20.0f * normal(rng) : 0.5f * normal(rng);
    spread[c] = c % 7 == 0 ? 8.0f : 0.3f;
  }
  std::vector<float> keys(static_cast<size_t>(tokens) * head_dim);
  for (int t = 0; t < tokens; ++t) {
    for (int c = 0; c < head_dim; ++c) keys[t * head_dim + c] = mean[c] + spread[c] * normal(rng);
  }
  return keys;
}

TEST(KvQ4ChannelTest, GroupMeetsTheFormatRuleChannelByChannel) {
  for (int d : {32, 40, 64, 80, 96, 128}) {
    const std::vector<float> keys = OutlierKeys(kC, d, 7u + d);
    std::vector<const float*> rows(kC);
    for (int j = 0; j < kC; ++j) rows[j] = j % 11 == 3 ? nullptr : keys.data() + j * d;
    std::vector<uint8_t> codes(static_cast<size_t>(kC) * Q4CodeBytes(d), 0xAB);
    std::vector<uint16_t> params(static_cast<size_t>(kC) * Q4ChannelParamHalves(d), 0xFFFF);
    QuantizeKeyGroupByChannel(rows.data(), d, codes.data(), params.data());
    for (size_t x = 2 * d; x < params.size(); ++x) {  // past the channels' (head_dim 40 and 80)
      EXPECT_EQ(params[x], 0) << "d=" << d << " half " << x;
    }
    std::vector<float> x(d);
    for (int c = 0; c < d; ++c) {
      double lo = INFINITY, hi = -INFINITY;
      for (int j = 0; j < kC; ++j) {
        if (rows[j] == nullptr) continue;
        lo = std::min<double>(lo, rows[j][c]);
        hi = std::max<double>(hi, rows[j][c]);
      }
      const double scale = HalfBitsToFloat(params[2 * c]);
      const double minimum = HalfBitsToFloat(params[2 * c + 1]);
      EXPECT_NEAR(scale, (hi - lo) / 15, (hi - lo) / 15 * 1e-3) << "d=" << d << " c=" << c;
      EXPECT_NEAR(minimum, lo, std::abs(lo) * 1e-3 + 1e-7);
      for (int j = 0; j < kC; ++j) {
        const uint8_t* token = codes.data() + static_cast<size_t>(j) * Q4CodeBytes(d);
        if (rows[j] == nullptr) {
          EXPECT_EQ(CodeOf(token, c, d), 0) << "an unfitted slot has zero codes";
          continue;
        }
        const double back = CodeOf(token, c, d) * scale + minimum;
        // Half a step, plus what rounding the step and the minimum to fp16 adds.
        EXPECT_LE(std::abs(back - rows[j][c]), scale / 2 + (hi - lo) * 2e-3 + std::abs(lo) * 1e-3)
            << "d=" << d << " c=" << c << " j=" << j;
      }
    }
    for (int j = 0; j < kC; ++j) {  // the reader agrees with the rule
      if (rows[j] == nullptr) continue;
      DequantizeKeyByChannel(codes.data() + static_cast<size_t>(j) * Q4CodeBytes(d),
                             params.data(), d, x.data());
      for (int c = 0; c < d; ++c) {
        const uint8_t* token = codes.data() + static_cast<size_t>(j) * Q4CodeBytes(d);
        EXPECT_EQ(x[c], CodeOf(token, c, d) * HalfBitsToFloat(params[2 * c]) +
                            HalfBitsToFloat(params[2 * c + 1]));
      }
    }
  }
}

TEST(KvQ4ChannelTest, AConstantChannelIsExact) {
  constexpr int d = 64;
  std::vector<float> keys = OutlierKeys(kC, d, 3u);
  for (int j = 0; j < kC; ++j) keys[j * d + 5] = 1.5f;
  std::vector<const float*> rows(kC);
  for (int j = 0; j < kC; ++j) rows[j] = keys.data() + j * d;
  std::vector<uint8_t> codes(static_cast<size_t>(kC) * Q4CodeBytes(d));
  std::vector<uint16_t> params(static_cast<size_t>(kC) * Q4ChannelParamHalves(d));
  QuantizeKeyGroupByChannel(rows.data(), d, codes.data(), params.data());
  std::vector<float> x(d);
  for (int j = 0; j < kC; ++j) {
    DequantizeKeyByChannel(codes.data() + j * Q4CodeBytes(d), params.data(), d, x.data());
    EXPECT_EQ(x[5], 1.5f);
  }
}

// One row of `len` slots written by WriteKeyGroupsByChannel in writes of the given sizes, with
// the exact rows kept as decode does (after the groups of each write).
struct Row {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> params;
};
Row WriteRow(const std::vector<float>& keys, int d, int len, int start, int sink, int window,
             const std::vector<int>& writes) {
  Row row{std::vector<uint8_t>(static_cast<size_t>(len) * Q4CodeBytes(d)),
          std::vector<uint16_t>(static_cast<size_t>(len) * Q4ChannelParamHalves(d))};
  std::vector<float> ek(static_cast<size_t>(sink + window) * d), ev(ek.size());
  int slot = 0;
  for (int n : writes) {
    const float* k = keys.data() + static_cast<size_t>(slot) * d;
    WriteKeyGroupsByChannel(d, sink, window, start, slot, n, k, d, ek.data(), row.codes.data(),
                            row.params.data());
    WriteExactRows(1, 1, d, sink, window, k, k, n, slot, &start, false, ek.data(), ev.data());
    slot += n;
  }
  return row;
}

TEST(KvQ4ChannelTest, GroupsAreTheSameBitsHoweverTheTokensArrive) {
  constexpr int kLen = 200;
  for (int d : {64, 80}) {
    const std::vector<float> keys = OutlierKeys(kLen, d, 11u);
    for (int start : {0, 37}) {
      for (int sink : {0, 1, 4}) {
        const Row whole = WriteRow(keys, d, kLen, start, sink, kC, {kLen});
        const Row steps = WriteRow(keys, d, kLen, start, sink, kC, std::vector<int>(kLen, 1));
        std::vector<int> prompt_then_steps{70};
        prompt_then_steps.resize(kLen - 70 + 1, 1);
        const Row mixed = WriteRow(keys, d, kLen, start, sink, 96, prompt_then_steps);
        // Complete groups only: slots [start, start + whole groups of tokens).
        const size_t first = static_cast<size_t>(start);
        const size_t end = first + static_cast<size_t>((kLen - start) / kC * kC);
        for (const Row* r : {&steps, &mixed}) {
          EXPECT_TRUE(std::equal(r->codes.begin() + first * Q4CodeBytes(d),
                                 r->codes.begin() + end * Q4CodeBytes(d),
                                 whole.codes.begin() + first * Q4CodeBytes(d)))
              << "d=" << d << " start=" << start << " sink=" << sink;
          EXPECT_TRUE(std::equal(r->params.begin() + first * Q4ChannelParamHalves(d),
                                 r->params.begin() + end * Q4ChannelParamHalves(d),
                                 whole.params.begin() + first * Q4ChannelParamHalves(d)))
              << "d=" << d << " start=" << start << " sink=" << sink;
        }
        // Groups start at the sequence's first token, wherever padding puts it, and its sink
        // tokens are not fitted: the first group's range is its other tokens'.
        std::vector<const float*> fitted(kC, nullptr);
        for (int j = sink; j < kC; ++j) fitted[j] = keys.data() + (start + j) * d;
        std::vector<uint8_t> codes(static_cast<size_t>(kC) * Q4CodeBytes(d));
        std::vector<uint16_t> params(static_cast<size_t>(kC) * Q4ChannelParamHalves(d));
        QuantizeKeyGroupByChannel(fitted.data(), d, codes.data(), params.data());
        EXPECT_TRUE(std::equal(params.begin(), params.end(),
                               whole.params.begin() + first * Q4ChannelParamHalves(d)));
        EXPECT_TRUE(std::equal(codes.begin(), codes.end(),
                               whole.codes.begin() + first * Q4CodeBytes(d)));
      }
    }
  }
}

struct Case {
  int sink, window, context, threads;
};

// DecodeAttentionQ4 with keys by channel against fp64 attention over the cache it means: exact
// tokens from their fp32 rows, other keys read back by the format's rule, values dequantized.
void ExpectMatches(const Case& c, int head_dim) {
  constexpr int kBatch = 3, kKvHeads = 2;
  const int start[kBatch] = {0, (c.context - 1) / 2, c.context};  // plain, padded, all padding
  const int d = head_dim;
  const Q4CacheShape shape{kBatch, kKvHeads, c.context + 5, d};
  const size_t rows = static_cast<size_t>(kBatch) * kKvHeads;
  std::vector<float> keys(rows * shape.max_len * d), values(keys.size());
  for (size_t r = 0; r < rows; ++r) {
    const std::vector<float> k = OutlierKeys(shape.max_len, d, static_cast<unsigned>(r + 17));
    std::copy(k.begin(), k.end(), keys.begin() + static_cast<long>(r * shape.max_len * d));
  }
  std::mt19937 rng(static_cast<unsigned>(c.context * 31 + c.sink));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : values) x = 0.5f + normal(rng);
  // The cache as decode steps leave it: values per token, keys by channel, exact rows.
  testing::Q4Planes k(shape), v(shape);
  k.params.resize(rows * shape.max_len * Q4ChannelParamHalves(d));
  v.Fill(values, false);
  std::vector<float> ek(static_cast<size_t>(ExactRowsFloats(kBatch, kKvHeads, d, c.sink,
                                                            c.window))),
      ev(ek.size());
  std::vector<float> kr(rows * d), vr(rows * d);
  for (int t = 0; t < c.context; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      const size_t src = (r * shape.max_len + t) * d;
      std::copy_n(keys.begin() + static_cast<long>(src), d, kr.begin() + static_cast<long>(r * d));
      std::copy_n(values.begin() + static_cast<long>(src), d,
                  vr.begin() + static_cast<long>(r * d));
    }
    for (size_t r = 0; r < rows; ++r) {
      WriteKeyGroupsByChannel(d, c.sink, c.window, start[r / kKvHeads], t, 1, kr.data() + r * d,
                              d, ek.data() + r * (c.sink + c.window) * d,
                              k.codes.data() + r * shape.max_len * Q4CodeBytes(d),
                              k.params.data() + r * shape.max_len * Q4ChannelParamHalves(d));
    }
    WriteExactRows(kBatch, kKvHeads, d, c.sink, c.window, kr.data(), vr.data(), 1, t, start,
                   false, ek.data(), ev.data());
  }
  std::vector<double> kd(keys.size()), vd = v.Dequantized();
  for (int b = 0; b < kBatch; ++b) {
    const int len = c.context - start[b];
    for (int h = 0; h < kKvHeads; ++h) {
      const size_t r = static_cast<size_t>(b) * kKvHeads + h;
      for (int i = 0; i < len; ++i) {
        const int slot = start[b] + i;
        const size_t at = (r * shape.max_len + slot) * d;
        const bool exact = i < c.sink || i >= len - c.window;
        const uint8_t* codes = k.codes.data() + (r * shape.max_len + slot) * Q4CodeBytes(d);
        const uint16_t* p = k.params.data() + (r * shape.max_len + start[b] + i / kC * kC) *
                                                  Q4ChannelParamHalves(d);
        for (int x = 0; x < d; ++x) {
          kd[at + x] = exact ? keys[at + x]
                             : CodeOf(codes, x, d) * static_cast<double>(HalfBitsToFloat(p[2 * x])) +
                                   HalfBitsToFloat(p[2 * x + 1]);
          if (exact) vd[at + x] = values[at + x];
        }
      }
    }
  }
  std::vector<Q4Isa> isas{Q4Isa::kScalar};
  for (Q4Isa isa : {Q4Isa::kAvx2, Q4Isa::kAvx512}) {
    if (Q4IsaAvailable(isa) && d % 64 == 0) isas.push_back(isa);
  }
  // 20 query heads per KV head: more than 16 heads and (head, group) pairs, which the AVX-512
  // path's ChannelQuery reduces 16 at a time.
  for (int group : {1, 3, 8, 20}) {
    const DecodeAttentionQ4Shape s{.batch = kBatch,
                                   .num_heads = kKvHeads * group,
                                   .num_kv_heads = kKvHeads,
                                   .head_dim = d,
                                   .max_len = shape.max_len,
                                   .cache_len = c.context,
                                   .scale = 1.0f / std::sqrt(static_cast<float>(d)),
                                   .keys_by_channel = true};
    std::vector<float> q(static_cast<size_t>(kBatch) * s.num_heads * d);
    for (float& x : q) x = normal(rng);
    const std::vector<double> ref = ReferenceDecode(
        {kBatch, s.num_heads, kKvHeads, d, s.max_len, c.context, s.scale}, q, kd, vd, start,
        false);
    const Q4ExactRows exact{c.sink, c.window, ek.data(), ev.data()};
    for (Q4Isa isa : isas) {
      std::vector<float> out(q.size(), -1.0f);
      const int threads = CpuThreads();
      SetCpuThreads(c.threads);
      DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                        {v.codes.data(), v.params.data()}, start, out.data(), isa, &exact);
      SetCpuThreads(threads);
      EXPECT_LE(MaxRelativeError(out, ref, d), 1e-4)
          << Q4IsaName(isa) << " sink=" << c.sink << " window=" << c.window
          << " context=" << c.context << " threads=" << c.threads << " group=" << group
          << " d=" << d;
    }
  }
}

TEST(KvQ4ChannelTest, DecodeAttentionMatchesFp64AroundGroupBoundaries) {
  for (int context : {1, 31, 32, 33, 34, 40, 64, 65, 66, 127, 128, 129, 300}) {
    ExpectMatches({1, kC, context, 1}, 64);
  }
  ExpectMatches({0, kC, 200, 1}, 64);   // no sink
  ExpectMatches({4, 100, 333, 1}, 64);  // a window longer than a group
  ExpectMatches({1, kC, 200, 1}, 128);
  ExpectMatches({1, kC, 200, 1}, 192);  // an odd number of 64-channel groups
  ExpectMatches({1, kC, 200, 1}, 256);
  ExpectMatches({1, kC, 150, 1}, 32);  // the scalar path's head sizes
  ExpectMatches({1, kC, 150, 1}, 40);  // a group's params spread over 3 halves a slot
  // A last per-token group of 16 or 32 values (scalar path); at 80, zero params past the channels.
  for (int context : {31, 32, 33, 64, 65, 129}) {
    ExpectMatches({1, kC, context, 1}, 80);
    ExpectMatches({1, kC, context, 1}, 96);
  }
  ExpectMatches({4, 100, 333, 1}, 80);
}

TEST(KvQ4ChannelTest, ThreadSplitsMergeAcrossGroups) {
  ExpectMatches({1, kC, 5000, 4}, 64);
  ExpectMatches({1, kC, 3001, 8}, 128);
  ExpectMatches({1, kC, 2100, 4}, 96);
}

}  // namespace
}  // namespace strata::kernels::cpu
