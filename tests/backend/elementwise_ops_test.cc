// CUDA element-wise kernels against fp64 references and their kernels/cpu twins: embedding,
// LayerNorm/RMSNorm, activations, RoPE (plain, linear and llama3 frequencies), adds, conversions
// and 4-bit weight expansion.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/weight_q4.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gelu_bound.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

using cuda_ops::ElemType;

class ElementwiseOpsTest : public GpuTest {};

TEST_F(ElementwiseOpsTest, EmbedMatchesTableRowsForEveryType) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int rows = 37, hidden = 67, n = 19;
  const std::vector<float> table = RandomNormals(rng, static_cast<size_t>(rows) * hidden);
  std::vector<int32_t> ids(n);
  std::uniform_int_distribution<int> pick(0, rows - 1);
  for (int32_t& id : ids) id = pick(rng);
  ids[0] = rows - 1;
  ids[1] = ids[2];  // a repeated id
  DeviceArray<int32_t> d_ids(ids);
  for (ElemType type : {ElemType::kF32, ElemType::kF16, ElemType::kBF16}) {
    std::vector<float> widened(table.size());
    DeviceBuffer d_table(table.size() * 4);
    if (type == ElemType::kF32) {
      widened = table;
      STRATA_CUDA_CHECK(cudaMemcpy(d_table.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    } else {
      const std::vector<uint16_t> bits =
          type == ElemType::kF16 ? ToHalfBits(table) : ToBf16Bits(table);
      ConvertToFloat(type == ElemType::kF16 ? DType::kF16 : DType::kBF16, bits.data(),
                     widened.data(), bits.size());
      STRATA_CUDA_CHECK(cudaMemcpy(d_table.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    }
    const std::vector<float> base = RandomFloats(rng, static_cast<size_t>(n) * hidden);
    for (bool accumulate : {false, true}) {
      DeviceArray<float> out(static_cast<size_t>(n) * hidden);
      if (accumulate) {
        out.Upload(base);
      } else {
        out.Poison();
      }
      ASSERT_EQ(cuda_ops::Embed(d_table.get(), type, hidden, d_ids.get(), n, accumulate,
                                ElemType::kF32, out.get(), nullptr),
                cudaSuccess);
      const std::vector<float> got = out.Download();
      for (int i = 0; i < n; ++i) {
        for (int d = 0; d < hidden; ++d) {
          const float want = widened[static_cast<size_t>(ids[i]) * hidden + d] +
                             (accumulate ? base[static_cast<size_t>(i) * hidden + d] : 0.0f);
          ASSERT_EQ(got[static_cast<size_t>(i) * hidden + d], want) << "row " << i << " dim " << d;
        }
      }
    }
  }
}

struct NormCase {
  int rows, dim;
};

TEST_F(ElementwiseOpsTest, NormsMatchFp64AndCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (const NormCase c : {NormCase{1, 1}, NormCase{3, 7}, NormCase{5, 64}, NormCase{17, 1000},
                           NormCase{2, 4096}, NormCase{1, 5120}}) {
    SCOPED_TRACE(::testing::Message() << "rows " << c.rows << " dim " << c.dim);
    const size_t n = static_cast<size_t>(c.rows) * c.dim;
    std::vector<float> x = RandomNormals(rng, n, 2.0f);
    for (size_t i = 0; i < n; ++i) x[i] += 0.5f;  // a non-zero mean
    const std::vector<float> w = RandomFloats(rng, static_cast<size_t>(c.dim), 0.5f, 1.5f);
    const std::vector<float> b = RandomFloats(rng, static_cast<size_t>(c.dim));
    const float eps = 1e-5f;
    std::vector<double> ref_ln(n), ref_rms(n);
    for (int r = 0; r < c.rows; ++r) {
      const float* xr = x.data() + static_cast<size_t>(r) * c.dim;
      double mean = 0, ss = 0;
      for (int i = 0; i < c.dim; ++i) mean += xr[i];
      mean /= c.dim;
      double var = 0;
      for (int i = 0; i < c.dim; ++i) {
        var += (xr[i] - mean) * (xr[i] - mean);
        ss += static_cast<double>(xr[i]) * xr[i];
      }
      var /= c.dim;
      for (int i = 0; i < c.dim; ++i) {
        ref_ln[static_cast<size_t>(r) * c.dim + i] = (xr[i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
        ref_rms[static_cast<size_t>(r) * c.dim + i] = xr[i] / std::sqrt(ss / c.dim + eps) * w[i];
      }
    }
    std::vector<float> cpu_ln(n), cpu_rms(n);
    kernels::cpu::LayerNorm(x.data(), w.data(), b.data(), eps, c.rows, c.dim, cpu_ln.data());
    kernels::cpu::RmsNorm(x.data(), w.data(), eps, c.rows, c.dim, cpu_rms.data());
    DeviceArray<float> dx(x), dw(w), db(b), dy(n);
    dy.Poison();
    ASSERT_EQ(cuda_ops::LayerNorm(ElemType::kF32, dx.get(), dw.get(), db.get(), eps, c.rows, c.dim,
                                  dy.get(), nullptr),
              cudaSuccess);
    const std::vector<float> ln = dy.Download();
    EXPECT_LT(NormalizedError(ref_ln, ln), 1e-5);
    EXPECT_LT(NormalizedError(ToDouble(cpu_ln), ln), 1e-5);
    // In place, without bias.
    ASSERT_EQ(cuda_ops::LayerNorm(ElemType::kF32, dx.get(), dw.get(), nullptr, eps, c.rows, c.dim,
                                  dx.get(), nullptr),
              cudaSuccess);
    std::vector<double> ref_nobias = ref_ln;
    for (size_t i = 0; i < n; ++i) ref_nobias[i] -= b[i % c.dim];
    EXPECT_LT(NormalizedError(ref_nobias, dx.Download()), 1e-5);
    dx.Upload(x);
    dy.Poison();
    ASSERT_EQ(cuda_ops::RmsNorm(ElemType::kF32, dx.get(), dw.get(), eps, c.rows, c.dim, dy.get(),
                                nullptr),
              cudaSuccess);
    const std::vector<float> rms = dy.Download();
    EXPECT_LT(NormalizedError(ref_rms, rms), 1e-5);
    EXPECT_LT(NormalizedError(ToDouble(cpu_rms), rms), 1e-5);
  }
}

TEST_F(ElementwiseOpsTest, ActivationsMatchFp64AndCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
    SCOPED_TRACE(n);
    const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(n), 3.0f);
    const std::vector<float> up = RandomNormals(rng, static_cast<size_t>(n));
    const std::vector<double> gelu = GeluFp64(x);
    std::vector<double> relu(n), silu(n);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      relu[i] = v > 0 ? v : 0;
      silu[i] = v / (1.0 + std::exp(-v)) * up[i];
    }
    std::vector<float> cpu_gelu = x, cpu_silu = x;
    kernels::cpu::Gelu(cpu_gelu.data(), static_cast<size_t>(n));
    kernels::cpu::SiluMul(cpu_silu.data(), up.data(), static_cast<size_t>(n));

    DeviceArray<float> dx(x), dup(up);
    ASSERT_EQ(cuda_ops::Relu(ElemType::kF32, dx.get(), n, nullptr), cudaSuccess);
    EXPECT_EQ(NormalizedError(relu, dx.Download()), 0.0);
    dx.Upload(x);
    ASSERT_EQ(cuda_ops::Gelu(ElemType::kF32, dx.get(), n, nullptr), cudaSuccess);
    const std::vector<float> g = dx.Download();
    // Element by element within GeluErrorBound, absolute plus relative: along the negative tail
    // 1 + erf cancels in fp32 and a relative bound fails a correct formula (issue 28, seed
    // 295997207); the CPU twin, itself within one bound, within two.
    size_t at = 0;
    EXPECT_LE(WorstGeluError(x, gelu, g, 1.0, &at), 1.0)
        << "x " << x[at] << " got " << g[at] << " fp64 " << gelu[at];
    EXPECT_LE(WorstGeluError(x, cpu_gelu, g, 2.0, &at), 1.0)
        << "x " << x[at] << " got " << g[at] << " cpu " << cpu_gelu[at];
    dx.Upload(x);
    ASSERT_EQ(cuda_ops::SiluMul(ElemType::kF32, dx.get(), dup.get(), n, nullptr), cudaSuccess);
    const std::vector<float> s = dx.Download();
    EXPECT_LT(NormalizedError(silu, s), 1e-6);
    EXPECT_LT(NormalizedError(ToDouble(cpu_silu), s), 1e-6);
  }
}

struct RopeCase {
  int tokens, heads, head_dim;
  kernels::cpu::RopeScalingKind scaling;
};

TEST_F(ElementwiseOpsTest, RopeMatchesFp64AndCpuForEveryScaling) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  using kernels::cpu::RopeScalingKind;
  for (const RopeCase c : {RopeCase{1, 1, 2, RopeScalingKind::kNone},
                           RopeCase{7, 3, 16, RopeScalingKind::kNone},
                           RopeCase{33, 8, 64, RopeScalingKind::kLinear},
                           RopeCase{5, 4, 128, RopeScalingKind::kLlama3},
                           RopeCase{129, 2, 128, RopeScalingKind::kLlama3}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << "x" << c.heads << "x" << c.head_dim);
    kernels::cpu::RopeParams params;
    params.head_dim = c.head_dim;
    params.theta = c.scaling == RopeScalingKind::kLlama3 ? 500000.0f : 10000.0f;
    params.scaling = c.scaling;
    params.factor = c.scaling == RopeScalingKind::kNone ? 1.0f : 8.0f;
    std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
    kernels::cpu::RopeInverseFrequencies(params, inv_freq.data());
    std::vector<int32_t> pos(static_cast<size_t>(c.tokens));
    std::uniform_int_distribution<int32_t> pick(0, 131071);
    for (int32_t& p : pos) p = pick(rng);
    pos[0] = 0;
    const size_t n = static_cast<size_t>(c.tokens) * c.heads * c.head_dim;
    const std::vector<float> x = RandomNormals(rng, n);
    std::vector<double> ref(n);
    const int half = c.head_dim / 2;
    for (int t = 0; t < c.tokens; ++t) {
      for (int h = 0; h < c.heads; ++h) {
        for (int i = 0; i < half; ++i) {
          // The angle is rounded to fp32 as both backends compute it; sin/cos then in fp64.
          const double angle = static_cast<float>(pos[t]) * inv_freq[i];
          const size_t base = (static_cast<size_t>(t) * c.heads + h) * c.head_dim;
          const double a = x[base + i], b = x[base + i + half];
          ref[base + i] = a * std::cos(angle) - b * std::sin(angle);
          ref[base + i + half] = b * std::cos(angle) + a * std::sin(angle);
        }
      }
    }
    std::vector<float> cpu = x;
    kernels::cpu::ApplyRope(cpu.data(), pos.data(), c.tokens, c.heads, c.head_dim, inv_freq.data());
    DeviceArray<float> dx(x), dfreq(inv_freq);
    DeviceArray<int32_t> dpos(pos);
    ASSERT_EQ(cuda_ops::ApplyRope(ElemType::kF32, dx.get(), dpos.get(), c.tokens, c.heads,
                                  c.head_dim, dfreq.get(), nullptr),
              cudaSuccess);
    const std::vector<float> got = dx.Download();
    EXPECT_LT(NormalizedError(ref, got), 1e-6);
    EXPECT_LT(NormalizedError(ToDouble(cpu), got), 1e-6);
  }
}

TEST_F(ElementwiseOpsTest, AddAndAddBias) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int rows = 13, cols = 301;
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> x = RandomNormals(rng, n), y = RandomNormals(rng, n);
  const std::vector<float> bias = RandomNormals(rng, static_cast<size_t>(cols));
  DeviceArray<float> dx(x), dy(y), db(bias);
  ASSERT_EQ(cuda_ops::Add(ElemType::kF32, dx.get(), dy.get(), static_cast<int64_t>(n), nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda_ops::AddBias(ElemType::kF32, dx.get(), db.get(), rows, cols, nullptr),
            cudaSuccess);
  const std::vector<float> got = dx.Download();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], (x[i] + y[i]) + bias[i % cols]) << i;
}

TEST_F(ElementwiseOpsTest, ConversionsRoundLikeTheHost) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  std::vector<float> x = RandomNormals(rng, 100003, 100.0f);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = 1e-7f;      // fp16 subnormal
  x[3] = 70000.0f;   // fp16 overflow
  x[4] = 3.0e38f;    // bf16 stays finite
  DeviceArray<float> dx(x);
  DeviceArray<uint16_t> dh(x.size());
  DeviceArray<float> back(x.size());
  for (ElemType type : {ElemType::kF16, ElemType::kBF16}) {
    dh.Poison();
    ASSERT_EQ(cuda_ops::Convert(dx.get(), ElemType::kF32, static_cast<int64_t>(x.size()), type,
                                dh.get(), nullptr),
              cudaSuccess);
    const std::vector<uint16_t> got = dh.Download();
    const std::vector<uint16_t> want = type == ElemType::kF16 ? ToHalfBits(x) : ToBf16Bits(x);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << i << " " << x[i];
    ASSERT_EQ(cuda_ops::Convert(dh.get(), type, static_cast<int64_t>(x.size()), ElemType::kF32,
                                back.get(), nullptr),
              cudaSuccess);
    const std::vector<float> widened = back.Download();
    std::vector<float> host(x.size());
    ConvertToFloat(type == ElemType::kF16 ? DType::kF16 : DType::kBF16, want.data(), host.data(),
                   host.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(widened[i], host[i]) << i;
    // From one half type to the other: the widened value rounded once.
    const ElemType other = type == ElemType::kF16 ? ElemType::kBF16 : ElemType::kF16;
    DeviceArray<uint16_t> dother(x.size());
    ASSERT_EQ(cuda_ops::Convert(dh.get(), type, static_cast<int64_t>(x.size()), other,
                                dother.get(), nullptr),
              cudaSuccess);
    const std::vector<uint16_t> other_bits = dother.Download();
    const std::vector<uint16_t> other_want =
        other == ElemType::kF16 ? ToHalfBits(host) : ToBf16Bits(host);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(other_bits[i], other_want[i]) << i;
  }
}

TEST_F(ElementwiseOpsTest, ExpandWeightQ4FollowsTheLayout) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int rows = 11, cols = 192;
  for (const int group : {64, 32}) {
    const int groups = cols / group, half = group / 2;
    std::vector<uint8_t> codes(static_cast<size_t>(rows) * cols / 2);
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& c : codes) c = static_cast<uint8_t>(byte(rng));
    const std::vector<float> scales =
        RandomFloats(rng, static_cast<size_t>(rows) * groups, 0.001f, 0.1f);
    const std::vector<float> mins =
        RandomFloats(rng, static_cast<size_t>(rows) * groups, -1.0f, 0.0f);
    std::vector<float> params_f(2 * scales.size());
    for (size_t i = 0; i < scales.size(); ++i) {
      params_f[2 * i] = scales[i];
      params_f[2 * i + 1] = mins[i];
    }
    const std::vector<uint16_t> params = ToHalfBits(params_f);
    std::vector<float> want(static_cast<size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const int g = c / group, j = c % group;
        const uint8_t b = codes[static_cast<size_t>(r) * cols / 2 + half * g + j % half];
        const int code = j < half ? (b & 0xF) : (b >> 4);
        const size_t p = 2 * (static_cast<size_t>(r) * groups + g);
        const float prod = static_cast<float>(code) * HalfToFloat(params[p]);
        want[static_cast<size_t>(r) * cols + c] = prod + HalfToFloat(params[p + 1]);
      }
    }
    DeviceArray<uint8_t> dcodes(codes);
    DeviceArray<uint16_t> dparams(params);
    for (ElemType type : {ElemType::kF32, ElemType::kF16, ElemType::kBF16}) {
      DeviceBuffer out(want.size() * 4);
      STRATA_CUDA_CHECK(cudaMemset(out.get(), 0xFF, want.size() * 4));
      ASSERT_EQ(
          cuda_ops::ExpandWeightQ4(dcodes.get(), reinterpret_cast<const __half*>(dparams.get()),
                                   rows, cols, group, type, out.get(), nullptr),
          cudaSuccess);
      STRATA_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> got(want.size());
      if (type == ElemType::kF32) {
        STRATA_CUDA_CHECK(
            cudaMemcpy(got.data(), out.get(), want.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << group << " " << i;
      } else {
        std::vector<uint16_t> bits(want.size());
        STRATA_CUDA_CHECK(
            cudaMemcpy(bits.data(), out.get(), bits.size() * 2, cudaMemcpyDeviceToHost));
        const std::vector<uint16_t> expect =
            type == ElemType::kF16 ? ToHalfBits(want) : ToBf16Bits(want);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(bits[i], expect[i]) << group << " " << i;
        }
      }
    }
    EXPECT_EQ(cuda_ops::ExpandWeightQ4(dcodes.get(), reinterpret_cast<const __half*>(dparams.get()),
                                       rows, 100, group, ElemType::kF16, nullptr, nullptr),
              cudaErrorInvalidValue);
  }
}

TEST_F(ElementwiseOpsTest, ExpandWeightQ4MatchesTheCpuTwinBitForBit) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const long rows = 37, cols = 320;
  const std::vector<float> w = RandomNormals(rng, static_cast<size_t>(rows * cols), 0.05f);
  for (const int group : {64, 32}) {
    std::vector<uint8_t> codes(kernels::cpu::WeightQ4CodeBytes(rows, cols));
    std::vector<uint16_t> params(kernels::cpu::WeightQ4ParamHalves(rows, cols, group));
    kernels::cpu::QuantizeWeightQ4(kernels::cpu::WeightQ4Source::kF32, w.data(), rows, cols, group,
                                   codes.data(), params.data());
    std::vector<float> want(w.size());
    kernels::cpu::ExpandWeightQ4(codes.data(), params.data(), rows, cols, group, want.data());
    DeviceArray<uint8_t> dcodes(codes);
    DeviceArray<uint16_t> dparams(params);
    DeviceArray<float> out(w.size());
    out.Poison();
    ASSERT_EQ(cuda_ops::ExpandWeightQ4(dcodes.get(), reinterpret_cast<const __half*>(dparams.get()),
                                       rows, cols, group, ElemType::kF32, out.get(), nullptr),
              cudaSuccess);
    const std::vector<float> got = out.Download();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << group << " " << i;
  }
}

}  // namespace
}  // namespace strata::testing
