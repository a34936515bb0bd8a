// Kernel exactness of the exact side rows (Q4ExactRows): DecodeAttentionQ4 with a sink and a
// window against an fp64 reference over a cache whose exact tokens hold the fp32 keys and values
// and whose other tokens hold the dequantized 4-bit ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/cpu/threads.h"
#include "tests/kernels/q4_reference.h"

namespace strata::kernels::cpu {
namespace {

using testing::HadamardF64;
using testing::MaxRelativeError;
using testing::Q4Planes;
using testing::ReferenceDecode;

struct Case {
  int sink, window, context, threads;
};

void ExpectExact(const Case& c, int head_dim) {
  constexpr int kBatch = 3, kKvHeads = 2;
  // Sequence 0 is unpadded, 1 starts midway (left padding), 2 is all padding.
  const int start[kBatch] = {0, (c.context - 1) / 2, c.context};
  const Q4CacheShape shape{kBatch, kKvHeads, c.context + 3, head_dim};
  const int d = head_dim;
  std::mt19937 rng(static_cast<unsigned>(c.sink * 7919 + c.window * 104729 + c.context));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = static_cast<size_t>(kBatch) * kKvHeads * shape.max_len * d;
  std::vector<float> keys(n), values(n);
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = 0.5f + normal(rng);
  for (bool rotate : {false, true}) {
    if (rotate && (d & (d - 1)) != 0) continue;  // rotation needs a power of two
    Q4Planes k(shape), v(shape);
    k.Fill(keys, rotate);
    v.Fill(values, false);
    // The exact rows, written one token at a time as decode steps append them.
    std::vector<float> ek(static_cast<size_t>(
        ExactRowsFloats(kBatch, kKvHeads, d, c.sink, c.window))),
        ev(ek.size());
    std::vector<float> kr(static_cast<size_t>(kBatch) * kKvHeads * d), vr(kr.size());
    for (int t = 0; t < c.context; ++t) {
      for (int r = 0; r < kBatch * kKvHeads; ++r) {
        const size_t src = (static_cast<size_t>(r) * shape.max_len + t) * d;
        std::copy_n(keys.begin() + src, d, kr.begin() + static_cast<long>(r) * d);
        std::copy_n(values.begin() + src, d, vr.begin() + static_cast<long>(r) * d);
      }
      WriteExactRows(kBatch, kKvHeads, d, c.sink, c.window, kr.data(), vr.data(), 1, t, start,
                     rotate, ek.data(), ev.data());
    }
    // The reference cache: exact tokens in fp64 from the fp32 rows (keys rotated in fp64).
    std::vector<double> kd = k.Dequantized(), vd = v.Dequantized();
    for (int b = 0; b < kBatch; ++b) {
      const int len = c.context - start[b];
      for (int i = 0; i < len; ++i) {
        if (i >= c.sink && i < len - c.window) continue;
        for (int h = 0; h < kKvHeads; ++h) {
          const size_t at = ((static_cast<size_t>(b) * kKvHeads + h) * shape.max_len + start[b] +
                             i) * d;
          for (int x = 0; x < d; ++x) {
            kd[at + x] = keys[at + x];
            vd[at + x] = values[at + x];
          }
          if (rotate) HadamardF64(kd.data() + at, d);
        }
      }
    }
    for (int group : {1, 3, 4, 8}) {
      const DecodeAttentionQ4Shape s{.batch = kBatch,
                                     .num_heads = kKvHeads * group,
                                     .num_kv_heads = kKvHeads,
                                     .head_dim = d,
                                     .max_len = shape.max_len,
                                     .cache_len = c.context,
                                     .scale = 1.0f / std::sqrt(static_cast<float>(d)),
                                     .keys_rotated = rotate};
      std::vector<float> q(static_cast<size_t>(kBatch) * s.num_heads * d);
      for (float& x : q) x = 2.0f * normal(rng);
      const std::vector<double> ref = ReferenceDecode(
          {kBatch, s.num_heads, kKvHeads, d, s.max_len, c.context, s.scale}, q, kd, vd, start,
          rotate);
      const Q4ExactRows exact{c.sink, c.window, ek.data(), ev.data()};
      for (Q4Isa isa : {Q4Isa::kScalar, Q4Isa::kAuto}) {
        std::vector<float> out(q.size(), -1.0f);
        const int threads = CpuThreads();
        SetCpuThreads(c.threads);
        DecodeAttentionQ4(s, q.data(), {k.codes.data(), k.params.data()},
                          {v.codes.data(), v.params.data()}, start, out.data(), isa, &exact);
        SetCpuThreads(threads);
        EXPECT_LE(MaxRelativeError(out, ref, d), 1e-4)
            << Q4IsaName(ResolveQ4Isa(isa, d)) << " sink=" << c.sink << " window=" << c.window
            << " context=" << c.context << " threads=" << c.threads << " group=" << group
            << " rotate=" << rotate;
      }
    }
  }
}

TEST(AttentionQ4ExactTest, SinkAndWindowMatchFp64AroundTheirLength) {
  // Contexts shorter than sink + window, equal to it, one longer, and much longer; the padded
  // sequence sees fewer real tokens still.
  for (int context : {1, 5, 17, 18, 40, 300}) {
    ExpectExact({1, 16, context, 1}, 64);
  }
  ExpectExact({4, 0, 30, 1}, 64);   // a sink only
  ExpectExact({0, 8, 30, 1}, 64);   // a window only
  ExpectExact({2, 5, 70, 1}, 32);   // the scalar path's head sizes
  ExpectExact({1, 16, 70, 1}, 80);
  ExpectExact({2, 5, 70, 1}, 96);
  ExpectExact({1, 16, 128, 1}, 128);
}

TEST(AttentionQ4ExactTest, ThreadSplitsMergeWithTheExactPart) {
  // Few long sequences: the 4-bit slots split over threads, merged with the exact part.
  ExpectExact({1, 16, 5000, 4}, 64);
  ExpectExact({3, 7, 3000, 8}, 64);
}

}  // namespace
}  // namespace strata::kernels::cpu
