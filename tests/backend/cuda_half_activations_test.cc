// CudaBackend with fp16 and bf16 activations against CpuBackend's fp32, through the Backend
// interface: every op of src/backend/backend.h that takes activations (the 4-bit cache ops are in
// cuda_kv_q4_backend_test.cc), on random inputs rounded to the half type first, the CPU given the
// rounded values as fp32. Both backends then compute on the same numbers in fp32, and the CUDA
// backend rounds what it stores once, so:
//   - where both run the same fp32 operations (Embed, AddPositionEmbedding, Add, ReLU,
//     ExpandWeightQ4), the CUDA result is the CPU's rounded to the half type, exactly;
//   - elsewhere the normalised error is that rounding, u / sqrt(3) in RMS for unit roundoff u
//     (fp16 2^-11: 2.8e-4; bf16 2^-8: 2.3e-3), plus the ops' own differences (1e-6 to 1e-5 in
//     cuda_backend_test.cc), plus, for a Linear over a weight of another type, the weight rounded
//     to the activations' type (of the same order), and for fp16 attention the probabilities
//     rounded to fp16 for the tensor-core P V: bounded by kHalfError (2e-3 for fp16, 1e-2 for
//     bf16), several times the expected error yet far below a wrong element or a missed row.
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/weight_q4.h"
#include "src/backend/backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/shapes.h"
#include "tests/backend/cuda_backend_workspace.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

using CudaHalfActivationsTest = CrossBackendTest;

constexpr SpanType kHalfTypes[] = {SpanType::kF16, SpanType::kBF16};

// The normalised error a half-typed result may have against the CPU's fp32 (the file's comment).
double HalfError(SpanType type) { return type == SpanType::kF16 ? 2e-3 : 1e-2; }

DType DTypeOf(SpanType type) {
  return type == SpanType::kF32 ? DType::kF32 : type == SpanType::kF16 ? DType::kF16 : DType::kBF16;
}

// The CUDA backend's result is the CPU backend's rounded to `type`, element by element.
void ExpectRoundedEqual(const std::vector<float>& cpu, const std::vector<float>& gpu,
                        SpanType type) {
  ASSERT_EQ(cpu.size(), gpu.size());
  const std::vector<float> want = RoundedTo(cpu, type);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(gpu[i], want[i]) << "element " << i << ": cpu " << cpu[i];
  }
}

TEST(CudaActivationTypeTest, HalfByDefaultBf16ForBf16WeightsFp32OnRequest) {
  std::unique_ptr<Backend> gpu = MakeCudaBackend();
  if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(gpu->ActivationType(DType::kF16), SpanType::kF16);
  EXPECT_EQ(gpu->ActivationType(DType::kF32), SpanType::kF16);
  EXPECT_EQ(gpu->ActivationType(DType::kQ4), SpanType::kF16);
  EXPECT_EQ(gpu->ActivationType(DType::kBF16), SpanType::kBF16);
  std::unique_ptr<Backend> fp32 = MakeCudaBackend({.device = 0, .activations = SpanType::kF32});
  ASSERT_NE(fp32, nullptr);
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4}) {
    EXPECT_EQ(fp32->ActivationType(d), SpanType::kF32);
  }
}

// Weights of the activations' type (the GEMM on them as they are), of fp32 and of the other half
// type (rounded into scratch first); y of the activations' type and fp32 (the logits); with and
// without bias; Linear and LinearRelu (cuBLASLt's epilogues against the CPU's Linear then ReLU).
TEST_F(CudaHalfActivationsTest, LinearMatchesCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int m, in, out;
  };
  for (const Case c : {Case{1, 64, 96}, Case{7, 129, 33}, Case{64, 512, 1024}, Case{3, 1000, 4097},
                       Case{33, 64, 95}}) {
    for (SpanType act : kHalfTypes) {
      const SpanType other = act == SpanType::kF16 ? SpanType::kBF16 : SpanType::kF16;
      for (SpanType weight : {act, SpanType::kF32, other}) {
        for (SpanType y_type : {act, SpanType::kF32}) {
          for (bool with_bias : {false, true}) {
            for (bool relu : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << c.m << "x" << c.in << "x" << c.out << " x " << SpanTypeName(act)
                           << " w " << SpanTypeName(weight) << " y " << SpanTypeName(y_type)
                           << " bias " << with_bias << " relu " << relu);
              const DType dtype = DTypeOf(weight);
              const HostWeight w =
                  MakeWeight(rng, static_cast<size_t>(c.out) * c.in, dtype, 0.05f);
              const HostWeight b = MakeWeight(rng, static_cast<size_t>(c.out), dtype, 0.1f);
              const std::vector<float> x =
                  RoundedTo(RandomNormals(rng, static_cast<size_t>(c.m) * c.in), act);
              auto linear = [&](Backend& backend, BackendWorkspace& ws, SpanType x_type,
                                SpanType out_type) {
                ws.Reset();
                const DeviceSpan y = ws.Activations(static_cast<size_t>(c.m) * c.out, out_type);
                const DeviceWeight wd = ws.Weight(w, dtype, c.out, c.in);
                const DeviceWeight bd = with_bias ? ws.Weight(b, dtype, c.out) : DeviceWeight{};
                const DeviceSpan xd = ws.Activations(x, x_type);
                if (relu) {
                  backend.LinearRelu(ws.stream(), xd, c.m, wd, bd, y);
                } else {
                  backend.Linear(ws.stream(), xd, c.m, wd, bd, y);
                }
                return ws.Read(y);
              };
              const std::vector<float> want =
                  linear(*cpu_, *host_, SpanType::kF32, SpanType::kF32);
              const std::vector<float> got = linear(*gpu_, *dev_, act, y_type);
              EXPECT_LT(NormalizedError(ToDouble(want), got), HalfError(act));
              if (relu) {
                for (size_t i = 0; i < got.size(); ++i) ASSERT_GE(got[i], 0.0f) << i;
              }
            }
          }
        }
      }
    }
  }
}

// Embed and AddPositionEmbedding (exact: the CPU's sums rounded), then LayerNorm (with bias, and
// in place without) and RmsNorm (in place), each on the same rounded input on both sides.
TEST_F(CudaHalfActivationsTest, EmbeddingsAndNormsMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int vocab = 97, positions = 100;
  struct Case {
    int rows, width;
  };
  for (const Case c : {Case{1, 31}, Case{31, 33}, Case{95, 1}, Case{1, 4096}, Case{64, 2048}}) {
    for (SpanType act : kHalfTypes) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.width << " " << SpanTypeName(act)
                                          << " weights " << DTypeName(dtype));
        const int n = c.rows, hidden = c.width;
        const size_t count = static_cast<size_t>(n) * hidden;
        const HostWeight table = MakeWeight(rng, static_cast<size_t>(vocab) * hidden, dtype, 1.0f);
        const HostWeight pos_table =
            MakeWeight(rng, static_cast<size_t>(positions) * hidden, dtype, 0.5f);
        const HostWeight norm_w = MakeWeight(rng, hidden, dtype, 1.0f);
        const HostWeight norm_b = MakeWeight(rng, hidden, dtype, 0.2f);
        std::vector<int32_t> ids(n), pos(n);
        for (int i = 0; i < n; ++i) {
          ids[i] = static_cast<int32_t>(rng() % vocab);
          pos[i] = static_cast<int32_t>(rng() % positions);
        }
        const std::vector<float> x = RoundedTo(RandomNormals(rng, count, 2.0f), act);
        // Each op on x given in `type`: the embedding, x plus the positions, and the norms of x.
        auto ops = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
          ws.Reset();
          const DeviceWeight w = ws.Weight(norm_w, dtype, hidden);
          const DeviceSpan e = ws.Activations(count, type), dx = ws.Activations(x, type);
          const DeviceSpan ln_in = ws.Activations(x, type), ln = ws.Activations(count, type);
          const DeviceSpan ln2 = ws.Activations(x, type), rms = ws.Activations(x, type);
          backend.Embed(ws.stream(), ws.Weight(table, dtype, vocab, hidden), ids, e);
          backend.AddPositionEmbedding(ws.stream(), ws.Weight(pos_table, dtype, positions, hidden),
                                       pos, dx);
          backend.LayerNorm(ws.stream(), ln_in, w, ws.Weight(norm_b, dtype, hidden), 1e-5f, n,
                            hidden, ln);
          backend.LayerNorm(ws.stream(), ln2, w, DeviceWeight{}, 1e-5f, n, hidden, ln2);
          backend.RmsNorm(ws.stream(), rms, w, 1e-6f, n, hidden, rms);
          return std::vector<std::vector<float>>{ws.Read(e), ws.Read(dx), ws.Read(ln), ws.Read(ln2),
                                                 ws.Read(rms)};
        };
        const std::vector<std::vector<float>> want = ops(*cpu_, *host_, SpanType::kF32);
        const std::vector<std::vector<float>> got = ops(*gpu_, *dev_, act);
        ExpectRoundedEqual(want[0], got[0], act);
        ExpectRoundedEqual(want[1], got[1], act);
        EXPECT_LT(NormalizedError(ToDouble(want[2]), got[2]), HalfError(act)) << "LayerNorm";
        EXPECT_LT(NormalizedError(ToDouble(want[3]), got[3]), HalfError(act))
            << "LayerNorm in place";
        EXPECT_LT(NormalizedError(ToDouble(want[4]), got[4]), HalfError(act)) << "RmsNorm in place";
      }
    }
  }
}

// Activate (ReLU exact, GELU), SiluMul, Add (exact) and Rope.
TEST_F(CudaHalfActivationsTest, ElementwiseOpsAndRopeMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (const size_t count : {size_t{1}, size_t{1023}, size_t{100003}}) {
    for (SpanType act : kHalfTypes) {
      SCOPED_TRACE(::testing::Message() << count << " elements " << SpanTypeName(act));
      const std::vector<float> x = RoundedTo(RandomNormals(rng, count, 3.0f), act);
      const std::vector<float> up = RoundedTo(RandomNormals(rng, count), act);
      auto ops = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
        ws.Reset();
        const DeviceSpan relu = ws.Activations(x, type), gelu = ws.Activations(x, type);
        const DeviceSpan silu = ws.Activations(x, type), sum = ws.Activations(x, type);
        const DeviceSpan dup = ws.Activations(up, type);
        backend.Activate(ws.stream(), ActivationKind::kRelu, relu);
        backend.Activate(ws.stream(), ActivationKind::kGelu, gelu);
        backend.SiluMul(ws.stream(), silu, dup);
        backend.Add(ws.stream(), sum, dup);
        return std::vector<std::vector<float>>{ws.Read(relu), ws.Read(gelu), ws.Read(silu),
                                               ws.Read(sum)};
      };
      const std::vector<std::vector<float>> want = ops(*cpu_, *host_, SpanType::kF32);
      const std::vector<std::vector<float>> got = ops(*gpu_, *dev_, act);
      ExpectRoundedEqual(want[0], got[0], act);
      EXPECT_LT(NormalizedError(ToDouble(want[1]), got[1]), HalfError(act)) << "GELU";
      EXPECT_LT(NormalizedError(ToDouble(want[2]), got[2]), HalfError(act)) << "SiluMul";
      ExpectRoundedEqual(want[3], got[3], act);
    }
  }
  struct RopeCase {
    int tokens, heads, head_dim;
  };
  for (const RopeCase c : {RopeCase{1, 32, 128}, RopeCase{31, 8, 64}, RopeCase{7, 3, 16}}) {
    std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
    RopeSpec spec;
    spec.head_dim = c.head_dim;
    RopeInverseFrequencies(spec, inv_freq.data());
    std::vector<int32_t> pos(static_cast<size_t>(c.tokens));
    for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 131072);
    for (SpanType act : kHalfTypes) {
      SCOPED_TRACE(::testing::Message() << "rope " << c.tokens << "x" << c.heads << "x"
                                        << c.head_dim << " " << SpanTypeName(act));
      const std::vector<float> x =
          RoundedTo(RandomNormals(rng, static_cast<size_t>(c.tokens) * c.heads * c.head_dim), act);
      auto rope = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
        ws.Reset();
        const DeviceSpan dx = ws.Activations(x, type);
        backend.Rope(ws.stream(), dx, pos, c.heads, c.head_dim, inv_freq);
        return ws.Read(dx);
      };
      EXPECT_LT(
          NormalizedError(ToDouble(rope(*cpu_, *host_, SpanType::kF32)), rope(*gpu_, *dev_, act)),
          HalfError(act));
    }
  }
}

// The 4-bit weight expanded into the activations' type: the CPU's fp32 expansion rounded.
TEST_F(CudaHalfActivationsTest, ExpandWeightQ4RoundsTheCpuExpansion) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int rows = 33, cols = 320, group = 64;
  const std::vector<float> w = RandomNormals(rng, static_cast<size_t>(rows) * cols, 0.05f);
  std::vector<uint8_t> codes(kernels::cpu::WeightQ4CodeBytes(rows, cols));
  std::vector<uint16_t> params(kernels::cpu::WeightQ4ParamHalves(rows, cols, group));
  kernels::cpu::QuantizeWeightQ4(kernels::cpu::WeightQ4Source::kF32, w.data(), rows, cols, group,
                                 codes.data(), params.data());
  auto expand = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
    ws.Reset();
    const DeviceSpan out = ws.Activations(w.size(), type);
    backend.ExpandWeightQ4(ws.stream(), ws.Raw(Bytes(codes)), ws.Raw(Bytes(params)), rows, cols,
                           group, out);
    return ws.Read(out);
  };
  const std::vector<float> want = expand(*cpu_, *host_, SpanType::kF32);
  for (SpanType act : kHalfTypes) {
    SCOPED_TRACE(SpanTypeName(act));
    ExpectRoundedEqual(want, expand(*gpu_, *dev_, act), act);
  }
}

// Causal attention over a dense cache of the activations' type: prefills (fp16: the tensor-core
// kernel at head_dim 64, 80, 96 and 128, the causal kernel at 16 and 256) and decode steps (fp16:
// the flash-decoding kernel at head_dim 64 and 128, splitting the long caches; else the prefill
// kernels), one sequence and 64, later sequences starting at a random slot.
TEST_F(CudaHalfActivationsTest, AttentionMatchesCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int batch, new_tokens, heads, kv_heads, head_dim, cache_len, max_len;
  };
  for (const Case c :
       {Case{2, 9, 4, 2, 16, 9, 12}, Case{1, 40, 12, 4, 128, 60, 60}, Case{2, 33, 8, 2, 64, 33, 40},
        Case{1, 95, 4, 4, 80, 95, 96}, Case{3, 31, 8, 1, 96, 62, 64},
        Case{1, 17, 4, 2, 256, 17, 17}, Case{3, 1, 8, 1, 64, 50, 64},
        Case{2, 1, 9, 3, 128, 600, 700}, Case{64, 1, 16, 4, 128, 95, 95},
        Case{64, 1, 8, 8, 64, 31, 32}, Case{2, 1, 8, 2, 96, 40, 41}, Case{1, 1, 8, 8, 64, 1, 1}}) {
    for (SpanType act : kHalfTypes) {
      SCOPED_TRACE(::testing::Message()
                   << c.batch << " x " << c.new_tokens << " tokens, heads " << c.heads << "/"
                   << c.kv_heads << ", head_dim " << c.head_dim << ", cache " << c.cache_len
                   << " of " << c.max_len << " " << SpanTypeName(act));
      const size_t q_n = static_cast<size_t>(c.batch) * c.new_tokens * c.heads * c.head_dim;
      const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * c.head_dim;
      const std::vector<float> q = RoundedTo(RandomNormals(rng, q_n), act);
      const std::vector<float> k = RoundedTo(RandomNormals(rng, kv_n), act);
      const std::vector<float> v = RoundedTo(RandomNormals(rng, kv_n), act);
      std::vector<int> start(static_cast<size_t>(c.batch));
      for (int b = 0; b < c.batch; ++b) {
        start[b] = b == 0 ? 0 : static_cast<int>(rng() % c.cache_len);
      }
      AttentionShape shape;
      shape.batch = c.batch;
      shape.new_tokens = c.new_tokens;
      shape.num_heads = c.heads;
      shape.num_kv_heads = c.kv_heads;
      shape.head_dim = c.head_dim;
      shape.max_len = c.max_len;
      shape.cache_len = c.cache_len;
      shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      auto attend = [&](Backend& backend, BackendWorkspace& ws, SpanType type) {
        ws.Reset();
        const DeviceSpan out = ws.Activations(q_n, type);
        backend.Attention(ws.stream(), shape, ws.Activations(q, type), ws.Activations(k, type),
                          ws.Activations(v, type), start, out);
        return ws.Read(out);
      };
      EXPECT_LT(NormalizedError(ToDouble(attend(*cpu_, *host_, SpanType::kF32)),
                                attend(*gpu_, *dev_, act)),
                HalfError(act));
    }
  }
}

// Ops whose spans are not all of one type are a bug the backend names.
TEST_F(CudaHalfActivationsTest, MixedActivationTypesAreABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const DeviceSpan half = dev_->Activations(64, SpanType::kF16);
  const DeviceSpan bf16 = dev_->Activations(64, SpanType::kBF16);
  EXPECT_DEATH(gpu_->Add(dev_->stream(), half, bf16), "not all of one type");
  const DeviceSpan y = dev_->Activations(8, SpanType::kBF16);
  std::mt19937_64 rng(TestSeed());
  const HostWeight w = MakeWeight(rng, 64, DType::kF16, 1.0f);
  EXPECT_DEATH(
      gpu_->Linear(dev_->stream(), half, 1, dev_->Weight(w, DType::kF16, 8, 8), DeviceWeight{}, y),
      "neither of x's type nor fp32");
}

}  // namespace
}  // namespace strata::testing
