// Kernel exactness: DecodeAttentionQ4 against an fp64 reference on the dequantized cache, for
// every instruction-set path this CPU has, forced one at a time.
#include "kernels/cpu/attention_q4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/threads.h"
#include "tests/kernels/q4_reference.h"

namespace strata::kernels::cpu {
namespace {

using testing::MaxRelativeError;
using testing::Q4Planes;
using testing::ReferenceDecode;

std::vector<Q4Isa> AvailableIsas(int head_dim) {
  std::vector<Q4Isa> isas;
  for (Q4Isa isa : {Q4Isa::kScalar, Q4Isa::kAvx2, Q4Isa::kAvx512}) {
    if (Q4IsaAvailable(isa) && ResolveQ4Isa(isa, head_dim) == isa) isas.push_back(isa);
  }
  return isas;
}

class AttentionQ4Exactness : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(AttentionQ4Exactness, MatchesFp64OnTheDequantizedCache) {
  const auto [head_dim, context] = GetParam();
  constexpr int kBatch = 3, kKvHeads = 2;
  // Sequence 0 is unpadded, 1 starts midway (left padding), 2 is all padding.
  const int start[kBatch] = {0, (context - 1) / 2, context};
  const Q4CacheShape shape{kBatch, kKvHeads, context + 5, head_dim};
  std::mt19937 rng(static_cast<unsigned>(head_dim * 100003 + context));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = static_cast<size_t>(kBatch) * kKvHeads * shape.max_len * head_dim;
  std::vector<float> keys(n), values(n);
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = 0.5f + normal(rng);

  const bool power_of_two = (head_dim & (head_dim - 1)) == 0;  // rotation needs one
  for (bool rotate : {false, true}) {
    if (rotate && !power_of_two) continue;
    Q4Planes k(shape), v(shape);
    k.Fill(keys, rotate);
    v.Fill(values, false);
    const std::vector<double> kd = k.Dequantized(), vd = v.Dequantized();
    for (int group : {1, 3, 4, 8}) {
      DecodeAttentionQ4Shape s;
      s.batch = kBatch;
      s.num_kv_heads = kKvHeads;
      s.num_heads = kKvHeads * group;
      s.head_dim = head_dim;
      s.max_len = shape.max_len;
      s.cache_len = context;
      s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      s.keys_rotated = rotate;
      std::vector<float> q(static_cast<size_t>(kBatch) * s.num_heads * head_dim);
      for (float& x : q) x = 2.0f * normal(rng);
      const std::vector<double> ref =
          ReferenceDecode({kBatch, s.num_heads, kKvHeads, head_dim, s.max_len, context, s.scale}, q,
                          kd, vd, start, rotate);
      for (Q4Isa isa : AvailableIsas(head_dim)) {
        std::vector<float> out(q.size(), -1.0f);
        DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                          {v.codes.data(), v.params.data()}, start, out.data(), isa);
        EXPECT_LE(MaxRelativeError(out, ref, head_dim), 1e-4)
            << Q4IsaName(isa) << " head_dim=" << head_dim << " context=" << context
            << " group=" << group << " rotate=" << rotate;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Contexts, AttentionQ4Exactness,
                         ::testing::Combine(::testing::Values(64),
                                            ::testing::Values(1, 63, 64, 65, 4095, 16384)));
INSTANTIATE_TEST_SUITE_P(OtherHeadSizes, AttentionQ4Exactness,
                         ::testing::Combine(::testing::Values(32, 128),
                                            ::testing::Values(1, 17, 65, 1000)));
// Three and four groups per head: the AVX-512 path's chunks of 64 code bytes then span two
// groups in three (or two) layouts, and its tiles route several slot vectors to each group.
// A 64-element group then a last one of 16 or 32 (scalar path, unrotated keys): contexts on both
// sides of the 16-token tiles.
INSTANTIATE_TEST_SUITE_P(ShortLastGroup, AttentionQ4Exactness,
                         ::testing::Combine(::testing::Values(80, 96),
                                            ::testing::Values(1, 15, 16, 17, 65, 1000)));
INSTANTIATE_TEST_SUITE_P(WideHeads, AttentionQ4Exactness,
                         ::testing::Combine(::testing::Values(192, 256),
                                            ::testing::Values(1, 33, 1000)));

TEST(AttentionQ4Test, PeakedSoftmaxAcrossTilesStaysExact) {
  // Scores that grow along the sequence force the online softmax to rescale at every tile.
  constexpr int kContext = 700, kDim = 64;
  const Q4CacheShape shape{1, 1, kContext, kDim};
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> keys(static_cast<size_t>(kContext) * kDim), values(keys.size());
  for (int t = 0; t < kContext; ++t) {
    for (int i = 0; i < kDim; ++i) keys[t * kDim + i] = 0.02f * t + 0.3f * normal(rng);
  }
  for (float& x : values) x = normal(rng);
  Q4Planes k(shape), v(shape);
  k.Fill(keys, false);
  v.Fill(values, false);
  DecodeAttentionQ4Shape s{1, 4, 1, kDim, kContext, kContext, 0.125f, false};
  std::vector<float> q(4 * kDim, 1.0f);
  const int start = 0;
  const std::vector<double> ref = ReferenceDecode({1, 4, 1, kDim, kContext, kContext, 0.125}, q,
                                                  k.Dequantized(), v.Dequantized(), &start, false);
  for (Q4Isa isa : AvailableIsas(kDim)) {
    std::vector<float> out(q.size());
    DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                      {v.codes.data(), v.params.data()}, &start, out.data(), isa);
    EXPECT_LE(MaxRelativeError(out, ref, kDim), 1e-4) << Q4IsaName(isa);
  }
}

TEST(AttentionQ4Test, ManyQueryHeadsAndLongContextStayExact) {
  // 12 and 16 query heads per KV head take the AVX-512 path's chunks of 8 heads and its generic
  // (runtime head count) tile; 70000 tokens make every accumulator run over thousands of tiles.
  for (const auto& [group, context] :
       {std::pair{12, 300}, std::pair{16, 77}, std::pair{1, 70000}}) {
    constexpr int kDim = 64, kKvHeads = 2;
    const Q4CacheShape shape{1, kKvHeads, context, kDim};
    std::mt19937 rng(static_cast<unsigned>(group * 7 + context));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> keys(static_cast<size_t>(kKvHeads) * context * kDim), values(keys.size());
    for (float& x : keys) x = normal(rng);
    for (float& x : values) x = 0.5f + normal(rng);
    Q4Planes k(shape), v(shape);
    k.Fill(keys, false);
    v.Fill(values, false);
    const int heads = kKvHeads * group;
    DecodeAttentionQ4Shape s{1, heads, kKvHeads, kDim, context, context, 0.125f, false};
    std::vector<float> q(static_cast<size_t>(heads) * kDim);
    for (float& x : q) x = 2.0f * normal(rng);
    const int start = 0;
    const std::vector<double> ref =
        ReferenceDecode({1, heads, kKvHeads, kDim, context, context, 0.125}, q, k.Dequantized(),
                        v.Dequantized(), &start, false);
    for (Q4Isa isa : AvailableIsas(kDim)) {
      std::vector<float> out(q.size());
      DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                        {v.codes.data(), v.params.data()}, &start, out.data(), isa);
      EXPECT_LE(MaxRelativeError(out, ref, kDim), 1e-4)
          << Q4IsaName(isa) << " group=" << group << " context=" << context;
    }
  }
}

TEST(AttentionQ4Test, QueryOutliersAndZeroGroupsStayExact) {
  // The AVX-512 path rounds each query group to integers relative to its largest element: one
  // channel 30x the others (a "massive activation") leaves the rest the fewest bits, and a group
  // of zeros has no scale at all (odd heads; at head_dim 64 their whole query is zero).
  for (int head_dim : {64, 128}) {
    constexpr int kContext = 2048, kKvHeads = 2, kGroup = 4;
    const Q4CacheShape shape{1, kKvHeads, kContext, head_dim};
    std::mt19937 rng(static_cast<unsigned>(head_dim + 5));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> keys(static_cast<size_t>(kKvHeads) * kContext * head_dim);
    std::vector<float> values(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = normal(rng) * (i % head_dim == 5 ? 4 : 1);
    for (float& x : values) x = 0.5f + normal(rng);
    Q4Planes k(shape), v(shape);
    k.Fill(keys, false);
    v.Fill(values, false);
    const int heads = kKvHeads * kGroup;
    DecodeAttentionQ4Shape s{1, heads, kKvHeads, head_dim, kContext, kContext, 0.125f, false};
    std::vector<float> q(static_cast<size_t>(heads) * head_dim);
    for (float& x : q) x = normal(rng);
    for (int h = 0; h < heads; ++h) {
      q[static_cast<size_t>(h) * head_dim + 5] *= 30.0f;
      if (h % 2 == 1) {
        std::fill_n(q.begin() + static_cast<long>(h) * head_dim + head_dim - 64, 64, 0.0f);
      }
    }
    const int start = 0;
    const std::vector<double> ref =
        ReferenceDecode({1, heads, kKvHeads, head_dim, kContext, kContext, 0.125}, q,
                        k.Dequantized(), v.Dequantized(), &start, false);
    for (Q4Isa isa : AvailableIsas(head_dim)) {
      std::vector<float> out(q.size());
      DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                        {v.codes.data(), v.params.data()}, &start, out.data(), isa);
      EXPECT_LE(MaxRelativeError(out, ref, head_dim), 1e-4)
          << Q4IsaName(isa) << " head_dim=" << head_dim;
    }
  }
}

TEST(AttentionQ4Test, FewLongSequencesSplitAcrossThreadsStayExact) {
  // Fewer (sequence, KV head) pairs than threads: each pair's tokens are split over several
  // threads and the ranges merged by their log-sum-exp. Sequence lengths 4300, 3000, 1 (one
  // token: all but one range empty) and 0 (all padding).
  struct Case {
    int threads, context;
    std::vector<int> start;
  };
  for (const Case& c : {Case{4, 5000, {700}}, Case{8, 3000, {0, 2999, 3000}}}) {
    constexpr int kDim = 64, kKvHeads = 1;
    const int batch = static_cast<int>(c.start.size());
    const Q4CacheShape shape{batch, kKvHeads, c.context, kDim};
    std::mt19937 rng(static_cast<unsigned>(c.context));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> keys(static_cast<size_t>(batch) * c.context * kDim), values(keys.size());
    for (float& x : keys) x = normal(rng);
    for (float& x : values) x = 0.5f + normal(rng);
    Q4Planes k(shape), v(shape);
    k.Fill(keys, false);
    v.Fill(values, false);
    const std::vector<double> kd = k.Dequantized(), vd = v.Dequantized();
    for (int group : {1, 4}) {
      const int heads = kKvHeads * group;
      DecodeAttentionQ4Shape s{batch, heads, kKvHeads, kDim, c.context, c.context, 0.125f, false};
      std::vector<float> q(static_cast<size_t>(batch) * heads * kDim);
      for (float& x : q) x = 2.0f * normal(rng);
      const std::vector<double> ref = ReferenceDecode(
          {batch, heads, kKvHeads, kDim, c.context, c.context, 0.125}, q, kd, vd, c.start.data(),
          false);
      for (Q4Isa isa : AvailableIsas(kDim)) {
        std::vector<float> out(q.size(), -1.0f);
        const int threads = CpuThreads();
        SetCpuThreads(c.threads);
        DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                          {v.codes.data(), v.params.data()}, c.start.data(), out.data(), isa);
        SetCpuThreads(threads);
        EXPECT_LE(MaxRelativeError(out, ref, kDim), 1e-4)
            << Q4IsaName(isa) << " threads=" << c.threads << " context=" << c.context
            << " group=" << group;
      }
    }
  }
}

TEST(AttentionQ4Test, AutoPicksTheWidestPathAndScalarForSmallHeads) {
  EXPECT_EQ(ResolveQ4Isa(Q4Isa::kAuto, 32), Q4Isa::kScalar);
  EXPECT_EQ(ResolveQ4Isa(Q4Isa::kAvx512, 32), Q4Isa::kScalar);
  const Q4Isa best = ResolveQ4Isa(Q4Isa::kAuto, 64);
  EXPECT_TRUE(Q4IsaAvailable(best));
  if (Q4IsaAvailable(Q4Isa::kAvx512)) {
    EXPECT_EQ(best, Q4Isa::kAvx512);
  }
}

}  // namespace
}  // namespace strata::kernels::cpu
