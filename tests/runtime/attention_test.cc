// The CPU attention kernel against a plain fp64 reference, with padding, GQA and multi-token
// (prefill) and single-token (decode) steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"

namespace strata::kernels::cpu {
namespace {

struct Case {
  int batch, new_tokens, heads, kv_heads, head_dim, cache_len;
};

void Reference(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, const std::vector<int>& start, std::vector<double>& out) {
  const int group = s.num_heads / s.num_kv_heads;
  out.assign(q.size(), 0.0);
  for (int b = 0; b < s.batch; ++b)
    for (int t = 0; t < s.new_tokens; ++t)
      for (int h = 0; h < s.num_heads; ++h) {
        const int slot = s.cache_len - s.new_tokens + t;
        const size_t row = (static_cast<size_t>(b) * s.new_tokens + t) * s.num_heads + h;
        if (slot < start[b]) continue;
        const size_t base = (static_cast<size_t>(b) * s.num_kv_heads + h / group) * s.max_len;
        std::vector<double> p;
        double mx = -INFINITY;
        for (int j = start[b]; j <= slot; ++j) {
          double dot = 0;
          for (int i = 0; i < s.head_dim; ++i)
            dot += static_cast<double>(q[row * s.head_dim + i]) * k[(base + j) * s.head_dim + i];
          p.push_back(dot * s.scale);
          mx = std::max(mx, p.back());
        }
        double sum = 0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int j = start[b]; j <= slot; ++j)
          for (int i = 0; i < s.head_dim; ++i)
            out[row * s.head_dim + i] += p[j - start[b]] / sum * v[(base + j) * s.head_dim + i];
      }
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesFp64Reference) {
  const Case c = GetParam();
  AttentionShape s;
  s.batch = c.batch;
  s.new_tokens = c.new_tokens;
  s.num_heads = c.heads;
  s.num_kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.max_len = c.cache_len + 3;
  s.cache_len = c.cache_len;
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto fill = [&](size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = dist(rng);
    return x;
  };
  const auto q = fill(static_cast<size_t>(c.batch) * c.new_tokens * c.heads * c.head_dim);
  const auto k = fill(static_cast<size_t>(c.batch) * c.kv_heads * s.max_len * c.head_dim);
  const auto v = fill(k.size());
  std::vector<int> start(c.batch);
  for (int b = 0; b < c.batch; ++b) start[b] = (b * 3) % std::max(1, c.cache_len - c.new_tokens + 1);
  std::vector<float> out(q.size(), 7.0f);
  CausalAttention(s, q.data(), k.data(), v.data(), start.data(), out.data());
  std::vector<double> ref;
  Reference(s, q, k, v, start, ref);
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err = std::max(err, std::abs(out[i] - ref[i]));
    norm = std::max(norm, std::abs(ref[i]));
  }
  EXPECT_LE(err, 1e-5 * std::max(1.0, norm));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Case{1, 1, 4, 4, 16, 1}, Case{2, 7, 4, 2, 16, 7},
                                           Case{3, 1, 8, 1, 32, 65}, Case{4, 5, 9, 3, 64, 20},
                                           Case{2, 1, 6, 2, 64, 300}));

// A query that sits in the padding of its sequence attends to nothing and yields zeros.
TEST(AttentionPaddingTest, PaddingQueriesAreZero) {
  AttentionShape s{1, 4, 2, 1, 8, 4, 4, 1.0f};
  std::vector<float> q(4 * 2 * 8, 1.0f), k(4 * 8, 0.5f), v(4 * 8, 2.0f), out(q.size(), 9.0f);
  const int start = 2;
  CausalAttention(s, q.data(), k.data(), v.data(), &start, out.data());
  for (int i = 0; i < 2 * 2 * 8; ++i) EXPECT_EQ(out[i], 0.0f);
  for (size_t i = 2 * 2 * 8; i < out.size(); ++i) EXPECT_FLOAT_EQ(out[i], 2.0f);
}

}  // namespace
}  // namespace strata::kernels::cpu
