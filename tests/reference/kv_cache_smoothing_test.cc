// Key smoothing of the reference 4-bit KV cache (tests/reference/kv_cache.h,
// kernels/cpu/kv_q4_smooth.h) is exact: decode attention on the smoothed (and rotated) cache
// equals fp64 attention of the original queries over the keys and values the cache reads back
// un-smoothed, so the transform itself adds no error beyond the 4-bit rounding. Also: padding
// rows do not enter the fit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/reference/kv_cache.h"
#include "tests/kernels/q4_reference.h"

namespace strata::reference {
namespace {

namespace kc = kernels::cpu;

constexpr int kBatch = 2, kKvHeads = 2, kHeads = 4, kDim = 64, kMaxLen = 40, kPrompt = 24;

// Rows [kBatch * tokens, kKvHeads * kDim] with a few channels far off zero, like real keys.
std::vector<float> Rows(std::mt19937& rng, int tokens) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(kBatch) * tokens * kKvHeads * kDim);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int c = static_cast<int>(i % kDim);
    rows[i] = (c % 17 == 3 ? 6.0f : 0.0f) + (c % 13 == 5 ? 3.0f : 1.0f) * normal(rng);
  }
  return rows;
}

// Relative error of the decode output for the query at the last filled slot.
double TransformError(bool rotate) {
  std::mt19937 rng(7);
  KvCacheOptions options;
  options.compress = true;
  options.rotate_keys = rotate;
  options.smooth_keys = true;
  KvCache cache(1, kBatch, kKvHeads, kMaxLen, kDim, options);
  const int start[kBatch] = {0, 5};  // sequence 1 is left-padded by 5 slots
  cache.Write(0, Rows(rng, kPrompt).data(), Rows(rng, kPrompt).data(), kPrompt, 0, start);
  int len = kPrompt;
  for (; len < kPrompt + 8; ++len) {
    cache.Write(0, Rows(rng, 1).data(), Rows(rng, 1).data(), 1, len, start);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(kBatch) * kHeads * kDim);
  for (float& x : q) x = 2.0f * normal(rng);
  kc::DecodeAttentionQ4Shape s;
  s.batch = kBatch;
  s.num_heads = kHeads;
  s.num_kv_heads = kKvHeads;
  s.head_dim = kDim;
  s.max_len = kMaxLen;
  s.cache_len = len;
  s.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  std::vector<float> out(q.size());
  cache.DecodeAttention(0, s, q.data(), start, out.data());

  std::vector<float> k(static_cast<size_t>(kBatch) * kKvHeads * len * kDim), v(k.size());
  cache.ExpandSlots(0, len, len, k.data(), v.data());
  const kc::testing::RefShape rs{kBatch, kHeads, kKvHeads, kDim, len, len, s.scale};
  const std::vector<double> ref =
      kc::testing::ReferenceDecode(rs, q, std::vector<double>(k.begin(), k.end()),
                                   std::vector<double>(v.begin(), v.end()), start, false);
  return kc::testing::MaxRelativeError(out, ref, kDim);
}

TEST(KvCacheSmoothing, DecodeOnTheSmoothedCacheIsExactAttentionOnWhatItHolds) {
  EXPECT_LE(TransformError(false), 1e-5);
  EXPECT_LE(TransformError(true), 1e-5);
}

TEST(KvCacheSmoothing, PaddingRowsDoNotEnterTheFit) {
  KvCacheOptions options;
  options.compress = true;
  options.smooth_keys = true;
  std::mt19937 rng(3);
  std::vector<float> k = Rows(rng, kPrompt), v = Rows(rng, kPrompt);
  const int start[kBatch] = {0, 6};
  KvCache clean(1, kBatch, kKvHeads, kMaxLen, kDim, options);
  clean.Write(0, k.data(), v.data(), kPrompt, 0, start);
  // Garbage in sequence 1's padding rows must not change what its real rows become.
  for (int t = 0; t < start[1]; ++t) {
    for (int i = 0; i < kKvHeads * kDim; ++i) {
      k[(static_cast<size_t>(kPrompt) + t) * kKvHeads * kDim + i] = 1e4f;
    }
  }
  KvCache padded(1, kBatch, kKvHeads, kMaxLen, kDim, options);
  padded.Write(0, k.data(), v.data(), kPrompt, 0, start);
  std::vector<float> kcl(static_cast<size_t>(kBatch) * kKvHeads * kPrompt * kDim), vc(kcl.size());
  std::vector<float> kp(kcl.size()), vp(kcl.size());
  clean.ExpandSlots(0, kPrompt, kPrompt, kcl.data(), vc.data());
  padded.ExpandSlots(0, kPrompt, kPrompt, kp.data(), vp.data());
  for (int h = 0; h < kKvHeads; ++h) {
    for (int t = start[1]; t < kPrompt; ++t) {
      const size_t at = ((static_cast<size_t>(1) * kKvHeads + h) * kPrompt + t) * kDim;
      for (int c = 0; c < kDim; ++c) ASSERT_EQ(kcl[at + c], kp[at + c]) << h << ' ' << t;
    }
  }
}

TEST(KvCacheSmoothing, NeedsTheCompressedCache) {
  KvCacheOptions options;
  options.smooth_keys = true;
  const Status s = KvCache::Supports(options, kDim);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("compressed"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace strata::reference
