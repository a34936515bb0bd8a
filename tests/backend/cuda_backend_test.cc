// CudaBackend against CpuBackend through the Backend interface: every op on the same random
// inputs, compared by normalised error. Each backend runs the ops on a stream of its own over spans
// of an arena of its own; inputs go in and results come back through that stream's copies.
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/rope.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/gemm.h"
#include "src/core/check.h"
#include "tests/backend/cuda_backend_workspace.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

// Enough for the largest case: a 4097 x 1000 fp32 weight and its activations.
constexpr uint64_t kArenaBytes = uint64_t{64} << 20;

class CudaBackendTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    cpu_ = MakeCpuBackend();
    gpu_ = MakeCudaBackend();
    ASSERT_NE(gpu_, nullptr);
    host_ = std::make_unique<BackendWorkspace>(*cpu_, kArenaBytes);
    dev_ = std::make_unique<BackendWorkspace>(*gpu_, kArenaBytes);
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<BackendWorkspace> host_;  // cpu_'s
  std::unique_ptr<BackendWorkspace> dev_;   // gpu_'s
};

TEST_F(CudaBackendTest, LinearMatchesCpuForEveryWeightType) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int m, in, out;
  };
  for (const Case c :
       {Case{1, 64, 96}, Case{7, 129, 33}, Case{64, 512, 1024}, Case{3, 1000, 4097}}) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << c.m << "x" << c.in << "x" << c.out << " "
                                          << DTypeName(dtype) << " bias " << with_bias);
        const HostWeight w = MakeWeight(rng, static_cast<size_t>(c.out) * c.in, dtype, 0.05f);
        const HostWeight b = MakeWeight(rng, static_cast<size_t>(c.out), dtype, 0.1f);
        const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(c.m) * c.in);
        auto linear = [&](Backend& backend, BackendWorkspace& ws) {
          ws.Reset();
          const DeviceSpan y = ws.Floats(static_cast<size_t>(c.m) * c.out);
          backend.Linear(ws.stream(), ws.Floats(x), c.m, ws.Weight(w, dtype, c.out, c.in),
                         with_bias ? ws.Weight(b, dtype, c.out) : DeviceWeight{}, y);
          return ws.Read(y);
        };
        const double err = NormalizedError(ToDouble(linear(*cpu_, *host_)), linear(*gpu_, *dev_));
        // fp16/bf16 weights: the activations are rounded to the weight's type for the GEMM.
        EXPECT_LT(err, dtype == DType::kF32 ? 1e-5 : dtype == DType::kF16 ? 2e-3 : 1e-2);
      }
    }
  }
}

TEST_F(CudaBackendTest, Fp32GemmOptionMatchesCpuExactlyForHalfWeights) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  CudaBackendOptions options;
  options.fp32_gemm = true;
  std::unique_ptr<Backend> gpu = MakeCudaBackend(options);
  ASSERT_NE(gpu, nullptr);
  BackendWorkspace dev(*gpu, kArenaBytes);
  // Two rounds of both types: the widened weight's scratch is reused from call to call.
  for (int round = 0; round < 2; ++round) {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      const int m = 5, in = 256, out = 768;
      const HostWeight w = MakeWeight(rng, static_cast<size_t>(out) * in, dtype, 0.05f);
      const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(m) * in);
      auto linear = [&](Backend& backend, BackendWorkspace& ws) {
        ws.Reset();
        const DeviceSpan y = ws.Floats(static_cast<size_t>(m) * out);
        backend.Linear(ws.stream(), ws.Floats(x), m, ws.Weight(w, dtype, out, in),
                       DeviceWeight{}, y);
        return ws.Read(y);
      };
      EXPECT_LT(NormalizedError(ToDouble(linear(*cpu_, *host_)), linear(*gpu, dev)), 1e-5);
    }
  }
}

TEST_F(CudaBackendTest, OpsChainOnTheStreamAndNormInPlace) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int m = 9, in = 320, out = 200;
  const HostWeight w = MakeWeight(rng, static_cast<size_t>(out) * in, DType::kF16, 0.05f);
  const HostWeight norm_w = MakeWeight(rng, static_cast<size_t>(in), DType::kF16, 1.0f);
  const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(m) * in);
  auto norm_then_linear = [&](Backend& backend, BackendWorkspace& ws) {
    const DeviceSpan dx = ws.Floats(x), y = ws.Floats(static_cast<size_t>(m) * out);
    backend.RmsNorm(ws.stream(), dx, ws.Weight(norm_w, DType::kF16, in), 1e-6f, m, in, dx);
    backend.Linear(ws.stream(), dx, m, ws.Weight(w, DType::kF16, out, in), DeviceWeight{}, y);
    return ws.Read(y);
  };
  EXPECT_LT(NormalizedError(ToDouble(norm_then_linear(*cpu_, *host_)),
                            norm_then_linear(*gpu_, *dev_)),
            2e-3);
}

TEST_F(CudaBackendTest, EmbeddingsNormsActivationsAndAdd) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int vocab = 300, hidden = 96, n = 11, positions = 40;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const HostWeight table = MakeWeight(rng, static_cast<size_t>(vocab) * hidden, dtype, 1.0f);
    const HostWeight pos_table =
        MakeWeight(rng, static_cast<size_t>(positions) * hidden, dtype, 0.5f);
    const HostWeight ln_w = MakeWeight(rng, hidden, dtype, 1.0f);
    const HostWeight ln_b = MakeWeight(rng, hidden, dtype, 0.2f);
    std::vector<int32_t> ids(n), pos(n);
    for (int i = 0; i < n; ++i) {
      ids[i] = static_cast<int32_t>(rng() % vocab);
      pos[i] = static_cast<int32_t>(rng() % positions);
    }
    // The embeddings, then their LayerNorm and RmsNorm.
    auto embed_and_norm = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const size_t count = static_cast<size_t>(n) * hidden;
      const DeviceSpan e = ws.Floats(count), ln = ws.Floats(count), rms = ws.Floats(count);
      const DeviceWeight w = ws.Weight(ln_w, dtype, hidden);
      backend.Embed(ws.stream(), ws.Weight(table, dtype, vocab, hidden), ids, e);
      backend.AddPositionEmbedding(ws.stream(), ws.Weight(pos_table, dtype, positions, hidden),
                                   pos, e);
      backend.LayerNorm(ws.stream(), e, w, ws.Weight(ln_b, dtype, hidden), 1e-5f, n, hidden, ln);
      backend.RmsNorm(ws.stream(), e, w, 1e-6f, n, hidden, rms);
      return std::vector<std::vector<float>>{ws.Read(e), ws.Read(ln), ws.Read(rms)};
    };
    const std::vector<std::vector<float>> want = embed_and_norm(*cpu_, *host_);
    const std::vector<std::vector<float>> got = embed_and_norm(*gpu_, *dev_);
    EXPECT_EQ(NormalizedError(ToDouble(want[0]), got[0]), 0.0);
    EXPECT_LT(NormalizedError(ToDouble(want[1]), got[1]), 1e-5);
    EXPECT_LT(NormalizedError(ToDouble(want[2]), got[2]), 1e-5);
  }

  const size_t count = 100003;
  const std::vector<float> x = RandomNormals(rng, count, 2.0f), up = RandomNormals(rng, count);
  for (ActivationKind kind : {ActivationKind::kRelu, ActivationKind::kGelu}) {
    auto activate = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan dx = ws.Floats(x);
      backend.Activate(ws.stream(), kind, dx);
      return ws.Read(dx);
    };
    EXPECT_LT(NormalizedError(ToDouble(activate(*cpu_, *host_)), activate(*gpu_, *dev_)), 1e-6);
  }
  auto silu_mul_add = [&](Backend& backend, BackendWorkspace& ws) {
    ws.Reset();
    const DeviceSpan dx = ws.Floats(x), dup = ws.Floats(up);
    backend.SiluMul(ws.stream(), dx, dup);
    backend.Add(ws.stream(), dx, dup);
    return ws.Read(dx);
  };
  EXPECT_LT(NormalizedError(ToDouble(silu_mul_add(*cpu_, *host_)), silu_mul_add(*gpu_, *dev_)),
            1e-6);
}

TEST_F(CudaBackendTest, RopeAndAttentionMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int batch, new_tokens, heads, kv_heads, head_dim, cache_len, max_len;
  };
  for (const Case c : {Case{2, 9, 4, 2, 16, 9, 12}, Case{3, 1, 8, 1, 64, 50, 64},
                       Case{1, 40, 12, 4, 128, 60, 60}, Case{2, 1, 9, 3, 64, 200, 256}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << " " << c.new_tokens << " " << c.heads << "/"
                                      << c.kv_heads << " " << c.head_dim << " " << c.cache_len);
    kernels::cpu::RopeParams rp;
    rp.head_dim = c.head_dim;
    rp.theta = 500000.0f;
    rp.scaling = kernels::cpu::RopeScalingKind::kLlama3;
    rp.factor = 8.0f;
    std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
    kernels::cpu::RopeInverseFrequencies(rp, inv_freq.data());
    const int rows = c.batch * c.new_tokens;
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (int i = 0; i < rows; ++i) pos[i] = c.cache_len - c.new_tokens + i % c.new_tokens;
    const std::vector<float> q =
        RandomNormals(rng, static_cast<size_t>(rows) * c.heads * c.head_dim);
    auto rope = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan dq = ws.Floats(q);
      backend.Rope(ws.stream(), dq, pos, c.heads, c.head_dim, inv_freq);
      return ws.Read(dq);
    };
    const std::vector<float> want_q = rope(*cpu_, *host_);
    const std::vector<float> got_q = rope(*gpu_, *dev_);
    EXPECT_LT(NormalizedError(ToDouble(want_q), got_q), 1e-6);

    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * c.head_dim;
    const std::vector<float> k = RandomNormals(rng, kv_n), v = RandomNormals(rng, kv_n);
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
    auto attend = [&](Backend& backend, BackendWorkspace& ws,
                      const std::vector<float>& queries) {
      ws.Reset();
      const DeviceSpan out = ws.Floats(queries.size());
      backend.Attention(ws.stream(), shape, ws.Floats(queries), ws.Floats(k), ws.Floats(v), start,
                        out);
      return ws.Read(out);
    };
    const std::vector<float> want = attend(*cpu_, *host_, want_q);
    EXPECT_LT(NormalizedError(ToDouble(want), attend(*gpu_, *dev_, got_q)), 1e-5);
  }
}

// Both ops on one stream over the same random logits: the CPU backend's token ids (the CUDA
// sampler can differ only when a draw falls within a few ulp of a boundary, which random logits
// do not hit) and its log-probabilities to 1e-9 relative. Sampling reads each row's first `limit`
// logits, scoring the whole row.
TEST_F(CudaBackendTest, SampleAndScoreTokensMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int vocab = 1000;
  auto spec = [&](float temperature, float top_p, int top_k) {
    SamplingSpec s;
    s.temperature = temperature;
    s.top_p = top_p;
    s.top_k = top_k;
    s.seed = rng();
    s.step = rng() % 4096;
    return s;
  };
  // Greedy (by temperature and by top_k), temperature with top-k, top-p, and their mixes.
  const std::vector<SamplingSpec> specs = {
      spec(0.0f, 1.0f, 0), spec(0.8f, 1.0f, 40), spec(1.0f, 0.9f, 0), spec(0.8f, 0.9f, 40),
      spec(1.0f, 1.0f, 1), spec(1.3f, 1.0f, -1), spec(0.7f, 0.5f, 0)};
  const int rows = static_cast<int>(specs.size());
  std::vector<float> logits = RandomNormals(rng, static_cast<size_t>(rows) * vocab, 3.0f);
  // Row 0 is greedy and its largest logit lies past 990: drawn only when the limit takes it in.
  logits[995] = 100.0f;
  std::vector<int32_t> tokens(specs.size());
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  tokens[1] = vocab - 1;  // past the limit: scoring reads the whole row
  for (const int limit : {990, vocab}) {
    SCOPED_TRACE(::testing::Message() << "limit " << limit);
    auto sample_and_score = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      std::vector<int32_t> ids(specs.size(), -1);
      std::vector<double> log_probs(specs.size(), NAN);
      const DeviceSpan d_logits = ws.Floats(logits);
      backend.SampleTokens(ws.stream(), d_logits, vocab, limit, specs, ids);
      backend.ScoreTokens(ws.stream(), d_logits, vocab, tokens, log_probs);
      ws.Finish();
      return std::pair{std::move(ids), std::move(log_probs)};
    };
    const auto [want_ids, want_log_probs] = sample_and_score(*cpu_, *host_);
    const auto [got_ids, got_log_probs] = sample_and_score(*gpu_, *dev_);
    EXPECT_EQ(got_ids[0] == 995, limit == vocab);
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(got_ids[r], want_ids[r]) << "row " << r;
      EXPECT_TRUE(got_ids[r] >= 0 && got_ids[r] < limit) << "row " << r << ": " << got_ids[r];
      EXPECT_NEAR(got_log_probs[r], want_log_probs[r], 1e-9 * std::abs(want_log_probs[r]))
          << "row " << r;
    }
  }
}

TEST_F(CudaBackendTest, GemmNTMatchesFp64ForEveryInputType) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  CudaStream stream(/*non_blocking=*/false);
  CublasHandle blas(stream.get());
  struct Case {
    int m, n, k;
  };
  for (const Case c : {Case{1, 1, 1}, Case{3, 17, 65}, Case{64, 256, 512}, Case{7, 4097, 33}}) {
    for (kernels::cuda::ElemType type :
         {kernels::cuda::ElemType::kF32, kernels::cuda::ElemType::kF16,
          kernels::cuda::ElemType::kBF16}) {
      const DType dtype = type == kernels::cuda::ElemType::kF32   ? DType::kF32
                          : type == kernels::cuda::ElemType::kF16 ? DType::kF16
                                                                  : DType::kBF16;
      const HostWeight a = MakeWeight(rng, static_cast<size_t>(c.m) * c.k, dtype, 1.0f);
      const HostWeight b = MakeWeight(rng, static_cast<size_t>(c.n) * c.k, dtype, 1.0f);
      const std::vector<float> c0 = RandomNormals(rng, static_cast<size_t>(c.m) * c.n);
      for (bool accumulate : {false, true}) {
        std::vector<double> ref(static_cast<size_t>(c.m) * c.n);
        for (int i = 0; i < c.m; ++i) {
          for (int j = 0; j < c.n; ++j) {
            double s = accumulate ? c0[static_cast<size_t>(i) * c.n + j] : 0.0;
            for (int t = 0; t < c.k; ++t) {
              s += static_cast<double>(a.values[static_cast<size_t>(i) * c.k + t]) *
                   b.values[static_cast<size_t>(j) * c.k + t];
            }
            ref[static_cast<size_t>(i) * c.n + j] = s;
          }
        }
        const std::span<const uint8_t> ha = dtype == DType::kF32 ? Bytes(a.f32) : Bytes(a.bits);
        const std::span<const uint8_t> hb = dtype == DType::kF32 ? Bytes(b.f32) : Bytes(b.bits);
        DeviceBuffer da(ha.size()), db(hb.size());
        STRATA_CUDA_CHECK(cudaMemcpy(da.get(), ha.data(), ha.size(), cudaMemcpyHostToDevice));
        STRATA_CUDA_CHECK(cudaMemcpy(db.get(), hb.data(), hb.size(), cudaMemcpyHostToDevice));
        DeviceArray<float> dc(c0);
        GemmNT(blas, c.m, c.n, c.k, type, da.get(), db.get(), dc.get(), c.n, accumulate);
        EXPECT_LT(NormalizedError(ref, dc.Download()), 1e-5)
            << c.m << "x" << c.n << "x" << c.k << " accumulate " << accumulate;
      }
    }
  }
}

}  // namespace
}  // namespace strata::testing
