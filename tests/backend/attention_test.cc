// Attention kernels against fp64 references: causal attention over fp32 and fp16 caches (also
// against kernels/cpu's CausalAttention), and decode attention over the fp16 and 4-bit caches
// (the reference runs on the dequantized cache). Shapes cover one token, odd and tile-straddling
// lengths, long contexts, grouped-query ratios 1, 3, 4, 8 and 16, left padding, fully padded
// sequences and forced split counts. Slots no query may read are filled with NaN.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_q4.h"
#include "kernels/kv_q4_format.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gpu_test_util.h"
#include "tests/backend/q4_reference.h"

namespace strata::testing {
namespace {

class AttentionTest : public GpuTest {};

// fp64 attention in the layouts of kernels/cpu/attention.h; q rows may be pre-transformed.
std::vector<double> RefAttention(int batch, int new_tokens, int heads, int kv_heads, int d,
                                 int max_len, int cache_len, double scale,
                                 const std::vector<double>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, const std::vector<int>& start) {
  const int group = heads / kv_heads;
  std::vector<double> out(static_cast<size_t>(batch) * new_tokens * heads * d, 0.0);
  std::vector<double> w(static_cast<size_t>(cache_len));
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < new_tokens; ++t) {
      const int slot = cache_len - new_tokens + t;
      if (slot < start[b]) continue;
      for (int h = 0; h < heads; ++h) {
        const size_t row = (static_cast<size_t>(b) * new_tokens + t) * heads + h;
        const size_t base = (static_cast<size_t>(b) * kv_heads + h / group) * max_len;
        double mx = -INFINITY;
        for (int j = start[b]; j <= slot; ++j) {
          double dot = 0;
          for (int i = 0; i < d; ++i) dot += q[row * d + i] * k[(base + j) * d + i];
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        double sum = 0;
        for (int j = start[b]; j <= slot; ++j) sum += (w[j] = std::exp(w[j] - mx));
        for (int j = start[b]; j <= slot; ++j) {
          for (int i = 0; i < d; ++i) out[row * d + i] += w[j] / sum * v[(base + j) * d + i];
        }
      }
    }
  }
  return out;
}

std::vector<double> HadamardRows(const std::vector<float>& x, int d) {
  std::vector<double> y(x.begin(), x.end());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double* v = y.data() + r * d;
    for (int len = 1; len < d; len <<= 1) {
      for (int i = 0; i < d; i += 2 * len) {
        for (int j = i; j < i + len; ++j) {
          const double a = v[j], b = v[j + len];
          v[j] = a + b;
          v[j + len] = a - b;
        }
      }
    }
    for (int i = 0; i < d; ++i) v[i] /= std::sqrt(static_cast<double>(d));
  }
  return y;
}

// NaN into the rows of [batch, kv_heads, max_len, d] no query may read: slots before start[b]
// and from cache_len on.
template <typename T>
void PoisonUnread(std::vector<T>& cache, int batch, int kv_heads, int max_len, int row_elems,
                  int cache_len, const std::vector<int>& start, T nan) {
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < kv_heads; ++h) {
      for (int s = 0; s < max_len; ++s) {
        if (s >= start[b] && s < cache_len) continue;
        const size_t row = (static_cast<size_t>(b) * kv_heads + h) * max_len + s;
        std::fill(cache.begin() + row * row_elems, cache.begin() + (row + 1) * row_elems, nan);
      }
    }
  }
}

struct CausalCase {
  int batch, new_tokens, heads, kv_heads, head_dim, cache_len, max_len;
  std::vector<int> start;
};

TEST_F(AttentionTest, CausalAttentionMatchesFp64AndCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const std::vector<CausalCase> cases = {
      {1, 1, 1, 1, 16, 1, 1, {0}},
      {2, 7, 4, 2, 16, 7, 9, {0, 3}},
      {3, 1, 8, 1, 64, 100, 120, {0, 50, 100}},
      {2, 33, 12, 4, 80, 40, 40, {0, 11}},
      {1, 65, 6, 6, 128, 65, 70, {0}},
      {2, 17, 16, 2, 256, 17, 20, {2, 0}},
      {1, 300, 4, 1, 128, 300, 300, {31}},
      {4, 3, 3, 3, 32, 1000, 1003, {0, 999, 998, 1000}},
  };
  for (const CausalCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " new " << c.new_tokens << " heads "
                                      << c.heads << "/" << c.kv_heads << " d " << c.head_dim
                                      << " len " << c.cache_len);
    const int d = c.head_dim;
    const size_t q_n = static_cast<size_t>(c.batch) * c.new_tokens * c.heads * d;
    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * d;
    const std::vector<float> q = RandomNormals(rng, q_n);
    std::vector<float> k = RandomNormals(rng, kv_n), v = RandomNormals(rng, kv_n);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    kernels::cpu::AttentionShape cpu_shape{c.batch, c.new_tokens, c.heads, c.kv_heads,
                                           d,       c.max_len,    c.cache_len, scale};
    std::vector<float> cpu_out(q_n);
    kernels::cpu::CausalAttention(cpu_shape, q.data(), k.data(), v.data(), c.start.data(),
                                  cpu_out.data());
    PoisonUnread(k, c.batch, c.kv_heads, c.max_len, d, c.cache_len, c.start, NAN);
    PoisonUnread(v, c.batch, c.kv_heads, c.max_len, d, c.cache_len, c.start, NAN);
    const std::vector<double> ref = RefAttention(c.batch, c.new_tokens, c.heads, c.kv_heads, d,
                                                 c.max_len, c.cache_len, scale, ToDouble(q), k, v,
                                                 c.start);
    cuda_ops::CausalAttentionShape s{c.batch, c.new_tokens, c.heads, c.kv_heads,
                                     d,       c.max_len,    c.cache_len, scale};
    DeviceArray<float> dq(q), dk(k), dv(v), out(q_n);
    DeviceArray<int> dstart(c.start);
    out.Poison();
    ASSERT_EQ(cuda_ops::CausalAttention(s, dq.get(), dk.get(), dv.get(), dstart.get(), out.get(),
                                        nullptr),
              cudaSuccess);
    const std::vector<float> got = out.Download();
    EXPECT_LT(NormalizedError(ref, got), 1e-5);
    EXPECT_LT(NormalizedError(ToDouble(cpu_out), got), 1e-5);

    // The same over an fp16 cache, against the reference on the rounded values.
    const std::vector<uint16_t> kh = ToHalfBits(k), vh = ToHalfBits(v);
    std::vector<float> kr(kv_n), vr(kv_n);
    ConvertToFloat(DType::kF16, kh.data(), kr.data(), kv_n);
    ConvertToFloat(DType::kF16, vh.data(), vr.data(), kv_n);
    const std::vector<double> ref16 = RefAttention(c.batch, c.new_tokens, c.heads, c.kv_heads, d,
                                                   c.max_len, c.cache_len, scale, ToDouble(q), kr,
                                                   vr, c.start);
    DeviceArray<uint16_t> dkh(kh), dvh(vh);
    out.Poison();
    ASSERT_EQ(cuda_ops::CausalAttention(s, dq.get(), reinterpret_cast<const __half*>(dkh.get()),
                                        reinterpret_cast<const __half*>(dvh.get()), dstart.get(),
                                        out.get(), nullptr),
              cudaSuccess);
    EXPECT_LT(NormalizedError(ref16, out.Download()), 1e-5);
  }
}

struct DecodeCase {
  int batch, heads, kv_heads, head_dim, cache_len, max_len;
  std::vector<int> start;
  int forced_splits;  // 0: the plan's
  bool rotated;
};

std::vector<DecodeCase> DecodeCases() {
  std::vector<DecodeCase> cases;
  for (int d : {64, 128}) {
    for (int group : {1, 3, 4, 8, 16}) {
      for (int len : {1, 15, 16, 17, 65, 1000, 4095}) {
        const int kv = group >= 8 ? 1 : 2;
        const int pad = len > 20 ? len / 3 : 0;
        cases.push_back({3, group * kv, kv, d, len, len + 5, {0, pad, len}, 0, false});
      }
    }
  }
  cases.push_back({1, 4, 1, 128, 16384, 16384, {0}, 0, false});
  cases.push_back({2, 8, 1, 64, 16384, 16400, {0, 9000}, 0, true});
  cases.push_back({2, 24, 8, 128, 777, 800, {5, 0}, 1, false});
  cases.push_back({2, 24, 8, 128, 777, 800, {5, 0}, 7, true});
  cases.push_back({1, 32, 4, 128, 8192, 8192, {0}, 64, false});
  return cases;
}

std::string Describe(const DecodeCase& c) {
  std::ostringstream os;
  os << "batch " << c.batch << " heads " << c.heads << "/" << c.kv_heads << " d " << c.head_dim
     << " len " << c.cache_len << " splits " << c.forced_splits << " rotated " << c.rotated;
  return os.str();
}

// Runs decode attention through the plan (or a forced split count) into a poisoned output.
template <typename Launch>
std::vector<float> RunDecode(const cuda_ops::DecodeAttentionShape& s, cuda_ops::DecodeCacheKind kind,
                             int forced_splits, Launch launch) {
  cuda_ops::DecodeAttentionPlan plan;
  EXPECT_EQ(cuda_ops::PlanDecodeAttention(s, kind, &plan), cudaSuccess);
  EXPECT_GE(plan.num_splits, 1);
  if (forced_splits > 0) {
    plan.num_splits = forced_splits;
    plan.workspace_bytes = static_cast<size_t>(s.batch) * s.num_heads * forced_splits *
                           (s.head_dim + 1) * sizeof(float);
  }
  DeviceBuffer workspace(plan.workspace_bytes);
  DeviceArray<float> out(static_cast<size_t>(s.batch) * s.num_heads * s.head_dim);
  out.Poison();
  EXPECT_EQ(launch(plan, plan.workspace_bytes > 0 ? workspace.get() : nullptr, out.get()),
            cudaSuccess);
  return out.Download();
}

TEST_F(AttentionTest, DecodeAttentionF16MatchesFp64) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (const DecodeCase& c : DecodeCases()) {
    SCOPED_TRACE(Describe(c));
    const int d = c.head_dim;
    const size_t q_n = static_cast<size_t>(c.batch) * c.heads * d;
    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * d;
    const std::vector<float> q = RandomNormals(rng, q_n);
    std::vector<uint16_t> kh = ToHalfBits(RandomNormals(rng, kv_n));
    std::vector<uint16_t> vh = ToHalfBits(RandomNormals(rng, kv_n));
    PoisonUnread<uint16_t>(kh, c.batch, c.kv_heads, c.max_len, d, c.cache_len, c.start, 0x7E00);
    PoisonUnread<uint16_t>(vh, c.batch, c.kv_heads, c.max_len, d, c.cache_len, c.start, 0x7E00);
    std::vector<float> k(kv_n), v(kv_n);
    ConvertToFloat(DType::kF16, kh.data(), k.data(), kv_n);
    ConvertToFloat(DType::kF16, vh.data(), v.data(), kv_n);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const std::vector<double> qref = c.rotated ? HadamardRows(q, d) : ToDouble(q);
    const std::vector<double> ref = RefAttention(c.batch, 1, c.heads, c.kv_heads, d, c.max_len,
                                                 c.cache_len, scale, qref, k, v, c.start);
    cuda_ops::DecodeAttentionShape s{c.batch, c.heads, c.kv_heads, d, c.max_len, c.cache_len,
                                     scale,   c.rotated};
    DeviceArray<float> dq(q);
    DeviceArray<uint16_t> dk(kh), dv(vh);
    DeviceArray<int> dstart(c.start);
    const std::vector<float> got =
        RunDecode(s, cuda_ops::DecodeCacheKind::kF16, c.forced_splits,
                  [&](const cuda_ops::DecodeAttentionPlan& plan, void* ws, float* out) {
                    return cuda_ops::DecodeAttentionF16(
                        s, dq.get(), reinterpret_cast<const __half*>(dk.get()),
                        reinterpret_cast<const __half*>(dv.get()), dstart.get(), plan, ws, out,
                        nullptr);
                  });
    EXPECT_LT(NormalizedError(ref, got), 5e-3);
  }
}

TEST_F(AttentionTest, DecodeAttentionQ4MatchesFp64OnTheDequantizedCache) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (const DecodeCase& c : DecodeCases()) {
    SCOPED_TRACE(Describe(c));
    const int d = c.head_dim;
    const int code_bytes = kernels::Q4CodeBytes(d);
    const int param_halves = kernels::Q4ParamHalves(d);
    const size_t q_n = static_cast<size_t>(c.batch) * c.heads * d;
    const size_t slots = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len;
    const std::vector<float> q = RandomNormals(rng, q_n);
    // Rows as a Linear writes them, [batch, cache_len, kv_heads, d], quantized by the device.
    const size_t rows = static_cast<size_t>(c.batch) * c.cache_len * c.kv_heads;
    const std::vector<float> k_rows = RandomNormals(rng, rows * d);
    std::vector<float> v_rows = RandomNormals(rng, rows * d);
    for (float& x : v_rows) x = 0.1f * x + 0.05f;
    cuda_ops::Q4CacheShape qs{c.batch, c.kv_heads, c.max_len, d};
    DeviceArray<uint8_t> k_codes(slots * code_bytes), v_codes(slots * code_bytes);
    DeviceArray<uint16_t> k_params(slots * param_halves), v_params(slots * param_halves);
    k_codes.Poison();
    v_codes.Poison();
    k_params.Poison();
    v_params.Poison();
    {
      DeviceArray<float> dk(k_rows), dv(v_rows);
      ASSERT_EQ(cuda_ops::WriteQ4Cache(qs, dk.get(), c.cache_len, 0, c.rotated, k_codes.get(),
                                       reinterpret_cast<__half*>(k_params.get()), nullptr),
                cudaSuccess);
      ASSERT_EQ(cuda_ops::WriteQ4Cache(qs, dv.get(), c.cache_len, 0, false, v_codes.get(),
                                       reinterpret_cast<__half*>(v_params.get()), nullptr),
                cudaSuccess);
    }
    // NaN parameters in the padding, as an unwritten cache may hold.
    std::vector<uint16_t> kp = k_params.Download(), vp = v_params.Download();
    PoisonUnread<uint16_t>(kp, c.batch, c.kv_heads, c.max_len, param_halves, c.cache_len, c.start,
                           0x7E00);
    PoisonUnread<uint16_t>(vp, c.batch, c.kv_heads, c.max_len, param_halves, c.cache_len, c.start,
                           0x7E00);
    k_params.Upload(kp);
    v_params.Upload(vp);
    const std::vector<uint8_t> kc = k_codes.Download(), vc = v_codes.Download();
    std::vector<float> k(slots * d), v(slots * d);
    for (size_t sl = 0; sl < slots; ++sl) {
      RefDequantizeRow(kc.data() + sl * code_bytes, kp.data() + sl * param_halves, d, k.data() + sl * d);
      RefDequantizeRow(vc.data() + sl * code_bytes, vp.data() + sl * param_halves, d, v.data() + sl * d);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const std::vector<double> qref = c.rotated ? HadamardRows(q, d) : ToDouble(q);
    const std::vector<double> ref = RefAttention(c.batch, 1, c.heads, c.kv_heads, d, c.max_len,
                                                 c.cache_len, scale, qref, k, v, c.start);
    cuda_ops::DecodeAttentionShape s{c.batch, c.heads, c.kv_heads, d, c.max_len, c.cache_len,
                                     scale,   c.rotated};
    DeviceArray<float> dq(q);
    DeviceArray<int> dstart(c.start);
    const std::vector<float> got = RunDecode(
        s, cuda_ops::DecodeCacheKind::kQ4, c.forced_splits,
        [&](const cuda_ops::DecodeAttentionPlan& plan, void* ws, float* out) {
          return cuda_ops::DecodeAttentionQ4(
              s, dq.get(), k_codes.get(), reinterpret_cast<const __half*>(k_params.get()),
              v_codes.get(), reinterpret_cast<const __half*>(v_params.get()), dstart.get(), plan,
              ws, out, nullptr);
        });
    EXPECT_LT(NormalizedError(ref, got), 5e-3);

    // The CPU twin on the same planes.
    kernels::cpu::DecodeAttentionQ4Shape cs;
    cs.batch = c.batch;
    cs.num_heads = c.heads;
    cs.num_kv_heads = c.kv_heads;
    cs.head_dim = d;
    cs.max_len = c.max_len;
    cs.cache_len = c.cache_len;
    cs.scale = scale;
    cs.keys_rotated = c.rotated;
    std::vector<float> cpu(q_n);
    kernels::cpu::DecodeAttentionQ4(cs, q.data(), {kc.data(), kp.data()}, {vc.data(), vp.data()},
                                    c.start.data(), cpu.data());
    EXPECT_LT(NormalizedError(ToDouble(cpu), got), 5e-3);
  }
}

TEST_F(AttentionTest, DecodeRejectsUnsupportedHeadDims) {
  cuda_ops::DecodeAttentionShape s{1, 4, 1, 96, 16, 16, 1.0f, false};
  cuda_ops::DecodeAttentionPlan plan;
  EXPECT_EQ(cuda_ops::PlanDecodeAttention(s, cuda_ops::DecodeCacheKind::kQ4, &plan),
            cudaErrorInvalidValue);
  s.head_dim = 64;
  s.num_heads = 5;  // not a multiple of the KV heads
  s.num_kv_heads = 2;
  EXPECT_EQ(cuda_ops::PlanDecodeAttention(s, cuda_ops::DecodeCacheKind::kF16, &plan),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace strata::testing
