// Exact tokens of the reference 4-bit KV cache (tests/reference/kv_cache.h, KvCacheOptions'
// exact_sink and exact_window): decode attention equals fp64 attention over a cache whose sink
// and window tokens are the fp32 keys and values written and whose other tokens are what the
// 4-bit planes read back (ExpandSlots), with plain, rotated, smoothed and channel keys, a
// left-padded sequence and the window wrapping around its ring many times.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kv_q4_format.h"
#include "tests/reference/kv_cache.h"
#include "tests/kernels/q4_reference.h"

namespace strata::reference {
namespace {

namespace kc = kernels::cpu;

constexpr int kBatch = 2, kKvHeads = 2, kHeads = 6, kDim = 64, kMaxLen = 80, kPrompt = 20;
constexpr int kSink = 1;

std::vector<float> Rows(std::mt19937& rng, int tokens) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(kBatch) * tokens * kKvHeads * kDim);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int c = static_cast<int>(i % kDim);
    rows[i] = (c % 17 == 3 ? 6.0f : 0.0f) + normal(rng);
  }
  return rows;
}

// Relative error of every decode step's output against the fp64 reference. *key_error, when
// given, gets the largest |key read back - key written| over the 4-bit tokens.
double ExactError(bool rotate, bool smooth, bool channel = false, double* key_error = nullptr) {
  const int kWindow = channel ? kernels::kQ4ChannelGroup : 6;
  std::mt19937 rng(11);
  KvCacheOptions options;
  options.compress = true;
  options.rotate_keys = rotate;
  options.smooth_keys = smooth;
  options.channel_keys = channel;
  options.exact_sink = kSink;
  options.exact_window = kWindow;
  EXPECT_TRUE(KvCache::Supports(options, kDim).ok());
  KvCache cache(1, kBatch, kKvHeads, kMaxLen, kDim, options);
  const int start[kBatch] = {0, 7};  // sequence 1 is left-padded by 7 slots
  // What was written, head-major [batch, kv_heads, max_len, head_dim].
  std::vector<float> k_all(static_cast<size_t>(kBatch) * kKvHeads * kMaxLen * kDim);
  std::vector<float> v_all(k_all.size());
  auto write = [&](int tokens, int first_slot) {
    const std::vector<float> k = Rows(rng, tokens), v = Rows(rng, tokens);
    for (int b = 0; b < kBatch; ++b) {
      for (int t = 0; t < tokens; ++t) {
        for (int h = 0; h < kKvHeads; ++h) {
          const size_t src = ((static_cast<size_t>(b) * tokens + t) * kKvHeads + h) * kDim;
          const size_t dst =
              ((static_cast<size_t>(b) * kKvHeads + h) * kMaxLen + first_slot + t) * kDim;
          std::copy_n(k.begin() + src, kDim, k_all.begin() + dst);
          std::copy_n(v.begin() + src, kDim, v_all.begin() + dst);
        }
      }
    }
    cache.Write(0, k.data(), v.data(), tokens, first_slot, start);
  };
  write(kPrompt, 0);
  double worst = 0;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int len = kPrompt + 1; len <= kMaxLen; ++len) {
    write(1, len - 1);
    std::vector<float> q(static_cast<size_t>(kBatch) * kHeads * kDim);
    for (float& x : q) x = 2.0f * normal(rng);
    const kc::DecodeAttentionQ4Shape s{.batch = kBatch,
                                       .num_heads = kHeads,
                                       .num_kv_heads = kKvHeads,
                                       .head_dim = kDim,
                                       .max_len = kMaxLen,
                                       .cache_len = len,
                                       .scale = 1.0f / std::sqrt(static_cast<float>(kDim))};
    std::vector<float> out(q.size());
    cache.DecodeAttention(0, s, q.data(), start, out.data());
    // The reference: 4-bit tokens as read back (un-rotated, un-smoothed), exact ones as written.
    std::vector<float> k(static_cast<size_t>(kBatch) * kKvHeads * len * kDim), v(k.size());
    cache.ExpandSlots(0, len, len, k.data(), v.data(), start);
    std::vector<double> kd(k.begin(), k.end()), vd(v.begin(), v.end());
    for (int b = 0; b < kBatch; ++b) {
      const int n = len - start[b];
      for (int i = 0; i < n; ++i) {
        for (int h = 0; h < kKvHeads; ++h) {
          const size_t head = static_cast<size_t>(b) * kKvHeads + h;
          if (i >= kSink && i < n - kWindow) {
            for (int c = 0; c < kDim && key_error != nullptr; ++c) {
              *key_error = std::max<double>(
                  *key_error, std::abs(kd[(head * len + start[b] + i) * kDim + c] -
                                       k_all[(head * kMaxLen + start[b] + i) * kDim + c]));
            }
            continue;
          }
          for (int c = 0; c < kDim; ++c) {
            kd[(head * len + start[b] + i) * kDim + c] =
                k_all[(head * kMaxLen + start[b] + i) * kDim + c];
            vd[(head * len + start[b] + i) * kDim + c] =
                v_all[(head * kMaxLen + start[b] + i) * kDim + c];
          }
        }
      }
    }
    const kc::testing::RefShape rs{kBatch, kHeads, kKvHeads, kDim, len, len, s.scale};
    const std::vector<double> ref = kc::testing::ReferenceDecode(rs, q, kd, vd, start, false);
    worst = std::max(worst, kc::testing::MaxRelativeError(out, ref, kDim));
  }
  return worst;
}

TEST(KvCacheExact, DecodeReadsTheSinkAndWindowExactly) {
  EXPECT_LE(ExactError(false, false), 1e-4);
  EXPECT_LE(ExactError(true, false), 1e-4);
  EXPECT_LE(ExactError(true, true), 1e-4);
}

// Keys by channel: decode attention reads the groups as ExpandSlots does, and the keys read back
// are within half a step of what was written, the step set by each channel's range over its 32
// tokens (a channel at 6 ± 1 and one at 0 ± 1 each get their own), where one group across the
// 64 channels of a token, as FlexGen's layout has, spans both and is twice as coarse.
TEST(KvCacheExact, ChannelKeysReadBackWithinTheirChannelsStep) {
  double channel_error = 0, plain_error = 0;
  EXPECT_LE(ExactError(false, false, true, &channel_error), 1e-4);
  ExactError(false, false, false, &plain_error);
  EXPECT_GT(channel_error, 0);
  EXPECT_LT(channel_error, 0.25);
  EXPECT_LT(2 * channel_error, plain_error);
}

TEST(KvCacheExact, NeedsTheCompressedCacheAndCounts) {
  KvCacheOptions options;
  options.exact_window = 4;
  Status s = KvCache::Supports(options, kDim);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("compressed"), std::string::npos) << s.message();
  options.compress = true;
  options.exact_window = -1;
  s = KvCache::Supports(options, kDim);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("negative"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace strata::reference
