// The tensor-core prefill attention (fp16 q, k, v, out) against an fp64 reference and against
// kernels/cpu's CausalAttention, both on the same fp16-rounded inputs: every supported head size,
// 1, 4 and 8 query heads per KV head, lengths that are not multiples of the 64-key or 64/128-row
// tiles, one sequence, left-padded and fully padded sequences, a chunked prefill (cache longer than
// the new tokens) and a batch of 64; each with the plan's block size and both forced ones.
//
// Tolerance: the normalised error ‖got − ref‖ / ‖ref‖ stays under 2e-3. Inputs are exact in fp16,
// so the error comes from P rounded to fp16 before P·V and from the fp16 output (each at most
// 2^-11 relative, about 3e-4 in the norm); accumulation is fp32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gpu_test_util.h"
#include "tests/kernels/causal_attention_fp64.h"

namespace strata::testing {
namespace {

constexpr double kTolerance = 2e-3;
constexpr uint16_t kHalfNan = 0x7E00;

class PrefillAttentionF16Test : public GpuTest {};

struct PrefillCase {
  int batch, new_tokens, heads, kv_heads, head_dim, cache_len, max_len;
  std::vector<int> start;
};

std::vector<PrefillCase> Cases() {
  std::vector<PrefillCase> cases;
  for (int d : {64, 80, 96, 128}) {
    for (int group : {1, 4, 8}) {
      cases.push_back({1, 131, 2 * group, 2, d, 131, 131, {0}});
      cases.push_back({3, 70, group, 1, d, 70, 75, {0, 23, 70}});
    }
  }
  cases.push_back({2, 33, 8, 2, 128, 100, 104, {0, 80}});  // chunked prefill behind 67 slots
  cases.push_back({2, 1, 4, 1, 64, 9, 9, {3, 8}});         // one new token (a decode step)
  std::vector<int> starts(64);
  for (int b = 0; b < 64; ++b) starts[b] = (b * 7) % 23;
  cases.push_back({64, 19, 8, 2, 128, 19, 19, starts});
  cases.push_back({1, 1000, 8, 1, 128, 1000, 1000, {0}});
  cases.push_back({2, 517, 12, 12, 64, 517, 520, {0, 200}});
  // 64 (sequence, KV head) pairs of 1 MB of K/V: the grid runs them in five bands (the last one
  // short); a chunked prefill behind 4,060 slots, one sequence partly padding.
  cases.push_back({4, 40, 16, 16, 64, 4100, 4100, {0, 1000, 3000, 4090}});
  return cases;
}

// The fp64 reference (tests/kernels/causal_attention_fp64.h) of case `c`.
std::vector<double> Reference(const PrefillCase& c, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v,
                              double scale) {
  return kernels::testing::CausalAttentionFp64(
      {c.batch, c.new_tokens, c.heads, c.kv_heads, c.head_dim, c.cache_len, c.max_len,
       c.start.data()},
      q, k, v, scale);
}

std::vector<float> HalfToFloats(const std::vector<uint16_t>& h) {
  std::vector<float> f(h.size());
  ConvertToFloat(DType::kF16, h.data(), f.data(), h.size());
  return f;
}

TEST_F(PrefillAttentionF16Test, MatchesFp64AndCpuAtEverySupportedShape) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (const PrefillCase& c : Cases()) {
    SCOPED_TRACE(::testing::Message()
                 << "batch " << c.batch << " new " << c.new_tokens << " heads " << c.heads << "/"
                 << c.kv_heads << " d " << c.head_dim << " len " << c.cache_len);
    const int d = c.head_dim;
    const size_t q_n = static_cast<size_t>(c.batch) * c.new_tokens * c.heads * d;
    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * d;
    const std::vector<uint16_t> qh = ToHalfBits(RandomNormals(rng, q_n));
    std::vector<uint16_t> kh = ToHalfBits(RandomNormals(rng, kv_n));
    std::vector<uint16_t> vh = ToHalfBits(RandomNormals(rng, kv_n));
    const std::vector<float> q = HalfToFloats(qh), k = HalfToFloats(kh), v = HalfToFloats(vh);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const std::vector<double> ref = Reference(c, q, k, v, scale);
    kernels::cpu::AttentionShape cpu_shape{c.batch, c.new_tokens, c.heads,     c.kv_heads,
                                           d,       c.max_len,    c.cache_len, scale};
    std::vector<float> cpu(q_n);
    kernels::cpu::CausalAttention(cpu_shape, q.data(), k.data(), v.data(), c.start.data(),
                                  cpu.data());

    // NaN in every cache row no query may read: before start[b] and from cache_len on.
    for (int b = 0; b < c.batch; ++b) {
      for (int h = 0; h < c.kv_heads; ++h) {
        for (int sl = 0; sl < c.max_len; ++sl) {
          if (sl >= c.start[b] && sl < c.cache_len) continue;
          const size_t row = (static_cast<size_t>(b) * c.kv_heads + h) * c.max_len + sl;
          std::fill(kh.begin() + row * d, kh.begin() + (row + 1) * d, kHalfNan);
          std::fill(vh.begin() + row * d, vh.begin() + (row + 1) * d, kHalfNan);
        }
      }
    }
    DeviceArray<uint16_t> dq(qh), dk(kh), dv(vh), out(q_n);
    DeviceArray<int> dstart(c.start);
    const cuda_ops::CausalAttentionShape s{c.batch, c.new_tokens, c.heads,     c.kv_heads,
                                           d,       c.max_len,    c.cache_len, scale};
    cuda_ops::PrefillAttentionPlan planned;
    ASSERT_EQ(cuda_ops::PlanPrefillAttention(s, &planned), cudaSuccess);
    const cuda_ops::PrefillAttentionPlan shapes[] = {planned, {4, 16}, {8, 16}, {4, 32}};
    for (const cuda_ops::PrefillAttentionPlan& plan : shapes) {
      SCOPED_TRACE(::testing::Message() << "warps " << plan.warps << " x " << plan.warp_rows);
      out.Poison();
      ASSERT_EQ(
          cuda_ops::PrefillAttentionF16(s, plan, reinterpret_cast<const __half*>(dq.get()),
                                        reinterpret_cast<const __half*>(dk.get()),
                                        reinterpret_cast<const __half*>(dv.get()), dstart.get(),
                                        reinterpret_cast<__half*>(out.get()), nullptr),
          cudaSuccess);
      const std::vector<float> got = HalfToFloats(out.Download());
      EXPECT_LT(NormalizedError(ref, got), kTolerance);
      EXPECT_LT(NormalizedError(ToDouble(cpu), got), kTolerance);
      // Padding queries get exact zeros.
      for (int b = 0; b < c.batch; ++b) {
        for (int t = 0; t < c.new_tokens; ++t) {
          if (c.cache_len - c.new_tokens + t >= c.start[b]) continue;
          const size_t row0 = (static_cast<size_t>(b) * c.new_tokens + t) * c.heads * d;
          for (size_t i = row0; i < row0 + static_cast<size_t>(c.heads) * d; ++i) {
            ASSERT_EQ(got[i], 0.0f) << "b " << b << " t " << t;
          }
        }
      }
    }
  }
}

TEST_F(PrefillAttentionF16Test, RejectsUnsupportedShapes) {
  cuda_ops::CausalAttentionShape s{1, 16, 4, 1, 64, 16, 16, 0.125f};
  cuda_ops::PrefillAttentionPlan plan;
  ASSERT_EQ(cuda_ops::PlanPrefillAttention(s, &plan), cudaSuccess);
  for (int d : {32, 72, 112, 256}) {
    s.head_dim = d;
    EXPECT_EQ(cuda_ops::PlanPrefillAttention(s, &plan), cudaErrorInvalidValue) << d;
    EXPECT_EQ(cuda_ops::PrefillAttentionF16(s, plan, nullptr, nullptr, nullptr, nullptr, nullptr,
                                            nullptr),
              cudaErrorInvalidValue)
        << d;
  }
  s.head_dim = 64;
  s.num_kv_heads = 3;  // 4 heads are not a multiple of 3 KV heads
  EXPECT_EQ(cuda_ops::PlanPrefillAttention(s, &plan), cudaErrorInvalidValue);
  s.num_kv_heads = 1;
  for (const cuda_ops::PrefillAttentionPlan bad :
       {cuda_ops::PrefillAttentionPlan{6, 16}, cuda_ops::PrefillAttentionPlan{8, 32},
        cuda_ops::PrefillAttentionPlan{4, 24}}) {
    EXPECT_EQ(
        cuda_ops::PrefillAttentionF16(s, bad, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
        cudaErrorInvalidValue)
        << bad.warps << " x " << bad.warp_rows;
  }
}

}  // namespace
}  // namespace strata::testing
