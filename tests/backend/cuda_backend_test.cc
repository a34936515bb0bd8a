// CudaBackend against CpuBackend through the Backend interface, as ggml's test-backend-ops: every
// op of src/backend/backend.h on the same random inputs, at the shapes the supported models use
// (head_dim 64 and 128; 1, 4 and 8 query heads per KV head) and at odd ones (lengths 1, 31, 33
// and 95, off multiples of 32; one sequence and 64). Each backend runs the ops on a stream of its
// own over spans of an arena of its own; inputs go in and results come back through that
// stream's copies. Tolerances, by normalised error against the CPU backend:
//   0 (the same fp32 operations): Embed, AddPositionEmbedding, Add, ReLU, ExpandWeightQ4;
//   1e-6 (a few roundings apart): SiluMul, Rope;
//   1e-5 (sums in another order): LayerNorm, RmsNorm, Attention, Linear on fp32 weights;
//   2e-3 and 1e-2: Linear on fp16 and bf16 weights (the GEMM rounds activations to them);
//   GELU element by element within two GeluErrorBounds (gelu_bound.h: 1 + erf cancels);
//   SampleTokens the same ids, ScoreTokens 1e-9 relative.
// The 4-bit KV cache ops are compared in cuda_kv_q4_backend_test.cc.
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/weight_q4.h"
#include "src/backend/backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/gemm.h"
#include "src/backend/shapes.h"
#include "tests/backend/cuda_backend_workspace.h"
#include "tests/backend/gelu_bound.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

using CudaBackendTest = CrossBackendTest;

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// Token rows by features: one token, lengths off multiples of 32, 64 rows; the models' hidden
// sizes and odd widths (1: a norm over one feature).
struct RowsCase {
  int rows, width;
};
constexpr RowsCase kRowsCases[] = {{1, 31},   {31, 33},  {33, 95},   {95, 1},
                                   {64, 95},  {1, 4096}, {64, 2048}, {11, 96}};

// The rotary tables of a head_dim: llama3-scaled at 128 (Llama 3), plain at 64 (TinyLlama).
std::vector<float> InverseFrequencies(int head_dim) {
  RopeSpec spec;
  spec.head_dim = head_dim;
  if (head_dim == 128) {
    spec.theta = 500000.0f;
    spec.scaling = RopeSpec::Scaling::kLlama3;
    spec.factor = 8.0f;
  }
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  RopeInverseFrequencies(spec, inv_freq.data());
  return inv_freq;
}

TEST_F(CudaBackendTest, LinearMatchesCpuForEveryWeightType) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int m, in, out;
  };
  for (const Case c : {Case{1, 64, 96}, Case{7, 129, 33}, Case{64, 512, 1024}, Case{3, 1000, 4097},
                       Case{31, 95, 33}, Case{33, 64, 95}, Case{95, 128, 31}, Case{1, 4096, 1}}) {
    for (DType dtype : kDTypes) {
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

// Embed, AddPositionEmbedding, then LayerNorm (with bias, and in place without), RmsNorm (in
// place) of the result, for every weight type.
TEST_F(CudaBackendTest, EmbeddingsAndNormsMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int vocab = 97, positions = 100;
  for (const RowsCase c : kRowsCases) {
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.width << " " << DTypeName(dtype));
      const int n = c.rows, hidden = c.width;
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
      ids[0] = vocab - 1;
      pos[0] = positions - 1;
      auto embed_and_norm = [&](Backend& backend, BackendWorkspace& ws) {
        ws.Reset();
        const size_t count = static_cast<size_t>(n) * hidden;
        const DeviceSpan e = ws.Floats(count), ln = ws.Floats(count);
        const DeviceWeight w = ws.Weight(norm_w, dtype, hidden);
        backend.Embed(ws.stream(), ws.Weight(table, dtype, vocab, hidden), ids, e);
        backend.AddPositionEmbedding(ws.stream(), ws.Weight(pos_table, dtype, positions, hidden),
                                     pos, e);
        std::vector<std::vector<float>> out = {ws.Read(e)};
        backend.LayerNorm(ws.stream(), e, w, ws.Weight(norm_b, dtype, hidden), 1e-5f, n, hidden,
                          ln);
        out.push_back(ws.Read(ln));
        backend.LayerNorm(ws.stream(), ln, w, DeviceWeight{}, 1e-5f, n, hidden, ln);
        out.push_back(ws.Read(ln));
        backend.RmsNorm(ws.stream(), e, w, 1e-6f, n, hidden, e);
        out.push_back(ws.Read(e));
        return out;
      };
      const std::vector<std::vector<float>> want = embed_and_norm(*cpu_, *host_);
      const std::vector<std::vector<float>> got = embed_and_norm(*gpu_, *dev_);
      EXPECT_EQ(NormalizedError(ToDouble(want[0]), got[0]), 0.0) << "embeddings";
      EXPECT_LT(NormalizedError(ToDouble(want[1]), got[1]), 1e-5) << "LayerNorm";
      EXPECT_LT(NormalizedError(ToDouble(want[2]), got[2]), 1e-5) << "LayerNorm in place";
      EXPECT_LT(NormalizedError(ToDouble(want[3]), got[3]), 1e-5) << "RmsNorm in place";
    }
  }
}

// Activate (ReLU, GELU), SiluMul and Add over every case's elements and a long odd count.
TEST_F(CudaBackendTest, ElementwiseOpsMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  std::vector<size_t> counts = {100003};
  for (const RowsCase c : kRowsCases) counts.push_back(static_cast<size_t>(c.rows) * c.width);
  for (const size_t count : counts) {
    SCOPED_TRACE(::testing::Message() << count << " elements");
    const std::vector<float> x = RandomNormals(rng, count, 3.0f), up = RandomNormals(rng, count);
    for (ActivationKind kind : {ActivationKind::kRelu, ActivationKind::kGelu}) {
      auto activate = [&](Backend& backend, BackendWorkspace& ws) {
        ws.Reset();
        const DeviceSpan dx = ws.Floats(x);
        backend.Activate(ws.stream(), kind, dx);
        return ws.Read(dx);
      };
      const std::vector<float> want = activate(*cpu_, *host_), got = activate(*gpu_, *dev_);
      if (kind == ActivationKind::kRelu) {
        EXPECT_EQ(NormalizedError(ToDouble(want), got), 0.0) << "ReLU";
      } else {
        size_t at = 0;
        EXPECT_LE(WorstGeluError(x, want, got, 2.0, &at), 1.0)
            << "GELU at x " << x[at] << ": cpu " << want[at] << " cuda " << got[at];
      }
    }
    auto silu_mul = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan dx = ws.Floats(x);
      backend.SiluMul(ws.stream(), dx, ws.Floats(up));
      return ws.Read(dx);
    };
    EXPECT_LT(NormalizedError(ToDouble(silu_mul(*cpu_, *host_)), silu_mul(*gpu_, *dev_)), 1e-6)
        << "SiluMul";
    auto add = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan dx = ws.Floats(x);
      backend.Add(ws.stream(), dx, ws.Floats(up));
      return ws.Read(dx);
    };
    EXPECT_EQ(NormalizedError(ToDouble(add(*cpu_, *host_)), add(*gpu_, *dev_)), 0.0) << "Add";
  }
}

TEST_F(CudaBackendTest, RopeMatchesCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int tokens, heads, head_dim;
  };
  for (const Case c : {Case{1, 32, 128}, Case{31, 8, 64}, Case{33, 8, 128}, Case{95, 4, 64},
                       Case{64, 40, 128}, Case{7, 3, 16}}) {
    SCOPED_TRACE(::testing::Message() << c.tokens << "x" << c.heads << "x" << c.head_dim);
    const std::vector<float> inv_freq = InverseFrequencies(c.head_dim);
    std::vector<int32_t> pos(static_cast<size_t>(c.tokens));
    for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 131072);
    pos[0] = 0;
    const std::vector<float> x =
        RandomNormals(rng, static_cast<size_t>(c.tokens) * c.heads * c.head_dim);
    auto rope = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan dx = ws.Floats(x);
      backend.Rope(ws.stream(), dx, pos, c.heads, c.head_dim, inv_freq);
      return ws.Read(dx);
    };
    EXPECT_LT(NormalizedError(ToDouble(rope(*cpu_, *host_)), rope(*gpu_, *dev_)), 1e-6);
  }
}

TEST_F(CudaBackendTest, ExpandWeightQ4MatchesCpuExactly) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int rows, cols, group;
  };
  for (const Case c : {Case{1, 64, 64}, Case{31, 96, 32}, Case{33, 320, 64}, Case{95, 4096, 64},
                       Case{64, 2048, 32}, Case{1, 32, 32}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " group " << c.group);
    const std::vector<float> w = RandomNormals(rng, static_cast<size_t>(c.rows) * c.cols, 0.05f);
    std::vector<uint8_t> codes(kernels::cpu::WeightQ4CodeBytes(c.rows, c.cols));
    std::vector<uint16_t> params(kernels::cpu::WeightQ4ParamHalves(c.rows, c.cols, c.group));
    kernels::cpu::QuantizeWeightQ4(kernels::cpu::WeightQ4Source::kF32, w.data(), c.rows, c.cols,
                                   c.group, codes.data(), params.data());
    auto expand = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan out = ws.Floats(w.size());
      backend.ExpandWeightQ4(ws.stream(), ws.Raw(Bytes(codes)), ws.Raw(Bytes(params)), c.rows,
                             c.cols, c.group, out);
      return ws.Read(out);
    };
    EXPECT_EQ(NormalizedError(ToDouble(expand(*cpu_, *host_)), expand(*gpu_, *dev_)), 0.0);
  }
}

// Causal attention over a contiguous cache: prefills and decode steps, one sequence and 64, each
// sequence after the first starting at a random slot.
TEST_F(CudaBackendTest, AttentionMatchesCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int batch, new_tokens, heads, kv_heads, head_dim, cache_len, max_len;
  };
  for (const Case c : {Case{2, 9, 4, 2, 16, 9, 12},      Case{3, 1, 8, 1, 64, 50, 64},
                       Case{1, 40, 12, 4, 128, 60, 60},  Case{2, 1, 9, 3, 64, 200, 256},
                       Case{1, 1, 8, 8, 64, 1, 1},       Case{1, 31, 32, 4, 64, 31, 31},
                       Case{2, 33, 8, 2, 128, 33, 40},   Case{1, 95, 4, 4, 128, 95, 96},
                       Case{3, 95, 8, 1, 64, 95, 100},   Case{64, 1, 16, 4, 128, 95, 95},
                       Case{64, 1, 8, 1, 128, 33, 33},   Case{64, 1, 4, 4, 64, 31, 32},
                       Case{64, 31, 8, 2, 64, 62, 64}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << " x " << c.new_tokens << " tokens, heads "
                                      << c.heads << "/" << c.kv_heads << ", head_dim "
                                      << c.head_dim << ", cache " << c.cache_len);
    const size_t q_n = static_cast<size_t>(c.batch) * c.new_tokens * c.heads * c.head_dim;
    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * c.head_dim;
    const std::vector<float> q = RandomNormals(rng, q_n);
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
    auto attend = [&](Backend& backend, BackendWorkspace& ws) {
      ws.Reset();
      const DeviceSpan out = ws.Floats(q_n);
      backend.Attention(ws.stream(), shape, ws.Floats(q), ws.Floats(k), ws.Floats(v), start, out);
      return ws.Read(out);
    };
    EXPECT_LT(NormalizedError(ToDouble(attend(*cpu_, *host_)), attend(*gpu_, *dev_)), 1e-5);
  }
}

// Both ops on one stream over the same random logits: the CPU backend's token ids (the CUDA
// sampler can differ only when a draw falls within a few ulp of a boundary, which random logits
// do not hit) and its log-probabilities to 1e-9 relative. Sampling reads each row's first `limit`
// logits, scoring the whole row: row 0 is greedy and its largest logit lies past the smaller
// limit, drawn only when the limit takes it in.
TEST_F(CudaBackendTest, SampleAndScoreTokensMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  auto spec = [&](float temperature, float top_p, int top_k) {
    SamplingSpec s;
    s.temperature = temperature;
    s.top_p = top_p;
    s.top_k = top_k;
    s.seed = rng();
    s.step = rng() % 4096;
    return s;
  };
  struct Case {
    int rows, vocab;
  };
  for (const Case c :
       {Case{7, 1000}, Case{1, 95}, Case{64, 33}, Case{64, 32001}, Case{31, 128256}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << " rows of " << c.vocab);
    const int vocab = c.vocab;
    // Greedy (by temperature and by top_k), temperature with top-k, top-p, and their mixes, in
    // turn down the rows with fresh seeds.
    std::vector<SamplingSpec> specs;
    for (int r = 0; r < c.rows; ++r) {
      const SamplingSpec kinds[] = {spec(0.0f, 1.0f, 0),  spec(0.8f, 1.0f, 40),
                                    spec(1.0f, 0.9f, 0),  spec(0.8f, 0.9f, 40),
                                    spec(1.0f, 1.0f, 1),  spec(1.3f, 1.0f, -1),
                                    spec(0.7f, 0.5f, 0)};
      specs.push_back(kinds[r % 7]);
    }
    std::vector<float> logits = RandomNormals(rng, static_cast<size_t>(c.rows) * vocab, 3.0f);
    const int small_limit = vocab > 10 ? vocab - 10 : vocab;
    logits[static_cast<size_t>(vocab - 1)] = 100.0f;
    std::vector<int32_t> tokens(specs.size());
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
    tokens[0] = vocab - 1;  // past the smaller limit: scoring reads the whole row
    for (const int limit : {small_limit, vocab}) {
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
      EXPECT_EQ(got_ids[0] == vocab - 1, limit == vocab);
      for (int r = 0; r < c.rows; ++r) {
        EXPECT_EQ(got_ids[r], want_ids[r]) << "row " << r;
        EXPECT_TRUE(got_ids[r] >= 0 && got_ids[r] < limit) << "row " << r << ": " << got_ids[r];
        EXPECT_NEAR(got_log_probs[r], want_log_probs[r], 1e-9 * std::abs(want_log_probs[r]))
            << "row " << r;
      }
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
