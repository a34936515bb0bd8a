// CudaBackend against CpuBackend through the Backend interface: every op on the same random
// inputs, compared by normalised error. Weights are host TensorViews (the upload cache) and
// device TensorViews (used in place); index arrays are host and device memory.
#include <cmath>
#include <cstdint>
#include <deque>
#include <vector>

#include "kernels/cpu/rope.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/gemm.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

// A weight in one dtype: the bits, and the exact fp32 values they stand for.
struct HostWeight {
  std::vector<float> f32;
  std::vector<uint16_t> bits;
  std::vector<float> values;
  TensorView View(DType dtype, std::vector<int64_t> shape) const {
    TensorView t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data = dtype == DType::kF32 ? static_cast<const void*>(f32.data()) : bits.data();
    return t;
  }
};

HostWeight MakeWeight(std::mt19937_64& rng, size_t n, DType dtype, float stddev) {
  HostWeight w;
  w.f32 = RandomNormals(rng, n, stddev);
  if (dtype == DType::kF32) {
    w.values = w.f32;
  } else {
    w.bits = dtype == DType::kF16 ? ToHalfBits(w.f32) : ToBf16Bits(w.f32);
    w.values.resize(n);
    ConvertToFloat(dtype, w.bits.data(), w.values.data(), n);
  }
  return w;
}

class CudaBackendTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    cpu_ = MakeCpuBackend();
    gpu_ = MakeCudaBackend();
    ASSERT_NE(gpu_, nullptr);
  }

  // A weight that lives as long as the test: the CUDA backend caches host weights by address, so
  // freeing one and allocating the next at the same address would hand it a stale copy.
  const HostWeight& Weight(std::mt19937_64& rng, size_t n, DType dtype, float stddev) {
    weights_.push_back(MakeWeight(rng, n, dtype, stddev));
    return weights_.back();
  }

  std::deque<HostWeight> weights_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
};

TEST_F(CudaBackendTest, LinearMatchesCpuForEveryWeightType) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  struct Case {
    int m, in, out;
  };
  for (const Case c : {Case{1, 64, 96}, Case{7, 129, 33}, Case{64, 512, 1024}, Case{3, 1000, 4097}}) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << c.m << "x" << c.in << "x" << c.out << " "
                                          << DTypeName(dtype) << " bias " << with_bias);
        const HostWeight& w = Weight(rng, static_cast<size_t>(c.out) * c.in, dtype, 0.05f);
        const HostWeight& b = Weight(rng, static_cast<size_t>(c.out), dtype, 0.1f);
        const TensorView wv = w.View(dtype, {c.out, c.in});
        const TensorView bv = with_bias ? b.View(dtype, {c.out}) : TensorView{};
        const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(c.m) * c.in);
        std::vector<float> want(static_cast<size_t>(c.m) * c.out);
        cpu_->Linear(x.data(), c.m, wv, bv, want.data());
        DeviceArray<float> dx(x), dy(want.size());
        dy.Poison();
        gpu_->Linear(dx.get(), c.m, wv, bv, dy.get());
        const double err = NormalizedError(ToDouble(want), dy.Download());
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
  options.weight_cache_bytes = 1 << 20;  // small: the cache evicts between calls
  std::unique_ptr<Backend> gpu = MakeCudaBackend(options);
  ASSERT_NE(gpu, nullptr);
  for (int round = 0; round < 2; ++round) {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      const int m = 5, in = 256, out = 768;  // 768 KiB as fp32: one copy fits at a time
      const HostWeight& w = Weight(rng, static_cast<size_t>(out) * in, dtype, 0.05f);
      const TensorView wv = w.View(dtype, {out, in});
      const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(m) * in);
      std::vector<float> want(static_cast<size_t>(m) * out);
      cpu_->Linear(x.data(), m, wv, TensorView{}, want.data());
      DeviceArray<float> dx(x), dy(want.size());
      gpu->Linear(dx.get(), m, wv, TensorView{}, dy.get());
      EXPECT_LT(NormalizedError(ToDouble(want), dy.Download()), 1e-5);
    }
  }
}

TEST_F(CudaBackendTest, DeviceWeightsAreUsedInPlace) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int m = 9, in = 320, out = 200;
  const HostWeight& w = Weight(rng, static_cast<size_t>(out) * in, DType::kF16, 0.05f);
  const HostWeight& norm_w = Weight(rng, static_cast<size_t>(in), DType::kF16, 1.0f);
  DeviceArray<uint16_t> dw(w.bits), dnorm(norm_w.bits);
  TensorView device_w = w.View(DType::kF16, {out, in});
  device_w.data = dw.get();
  TensorView device_norm = norm_w.View(DType::kF16, {in});
  device_norm.data = dnorm.get();
  const std::vector<float> x = RandomNormals(rng, static_cast<size_t>(m) * in);
  std::vector<float> normed(x.size()), want(static_cast<size_t>(m) * out);
  cpu_->RmsNorm(x.data(), norm_w.View(DType::kF16, {in}), 1e-6f, m, in, normed.data());
  cpu_->Linear(normed.data(), m, w.View(DType::kF16, {out, in}), TensorView{}, want.data());
  DeviceArray<float> dx(x), dy(want.size());
  gpu_->RmsNorm(dx.get(), device_norm, 1e-6f, m, in, dx.get());
  gpu_->Linear(dx.get(), m, device_w, TensorView{}, dy.get());
  EXPECT_LT(NormalizedError(ToDouble(want), dy.Download()), 2e-3);
}

TEST_F(CudaBackendTest, EmbeddingsNormsActivationsAndAdd) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  const int vocab = 300, hidden = 96, n = 11, positions = 40;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const HostWeight& table = Weight(rng, static_cast<size_t>(vocab) * hidden, dtype, 1.0f);
    const HostWeight& pos_table = Weight(rng, static_cast<size_t>(positions) * hidden, dtype, 0.5f);
    const HostWeight& ln_w = Weight(rng, hidden, dtype, 1.0f);
    const HostWeight& ln_b = Weight(rng, hidden, dtype, 0.2f);
    std::vector<int32_t> ids(n), pos(n);
    for (int i = 0; i < n; ++i) {
      ids[i] = static_cast<int32_t>(rng() % vocab);
      pos[i] = static_cast<int32_t>(rng() % positions);
    }
    std::vector<float> want(static_cast<size_t>(n) * hidden);
    cpu_->Embed(table.View(dtype, {vocab, hidden}), ids.data(), n, want.data());
    cpu_->AddPositionEmbedding(pos_table.View(dtype, {positions, hidden}), pos.data(), n, want.data());
    DeviceArray<float> got(want.size());
    DeviceArray<int32_t> dpos(pos);
    gpu_->Embed(table.View(dtype, {vocab, hidden}), ids.data(), n, got.get());  // host ids
    gpu_->AddPositionEmbedding(pos_table.View(dtype, {positions, hidden}), dpos.get(), n,
                               got.get());  // device positions
    EXPECT_EQ(NormalizedError(ToDouble(want), got.Download()), 0.0);

    std::vector<float> normed(want.size());
    cpu_->LayerNorm(want.data(), ln_w.View(dtype, {hidden}), ln_b.View(dtype, {hidden}), 1e-5f, n,
                    hidden, normed.data());
    DeviceArray<float> dnormed(want.size());
    gpu_->LayerNorm(got.get(), ln_w.View(dtype, {hidden}), ln_b.View(dtype, {hidden}), 1e-5f, n,
                    hidden, dnormed.get());
    EXPECT_LT(NormalizedError(ToDouble(normed), dnormed.Download()), 1e-5);
    cpu_->RmsNorm(want.data(), ln_w.View(dtype, {hidden}), 1e-6f, n, hidden, normed.data());
    gpu_->RmsNorm(got.get(), ln_w.View(dtype, {hidden}), 1e-6f, n, hidden, dnormed.get());
    EXPECT_LT(NormalizedError(ToDouble(normed), dnormed.Download()), 1e-5);
  }

  const int64_t count = 100003;
  const std::vector<float> x = RandomNormals(rng, count, 2.0f), up = RandomNormals(rng, count);
  for (ActivationKind kind : {ActivationKind::kRelu, ActivationKind::kGelu}) {
    std::vector<float> want = x;
    cpu_->Activate(kind, want.data(), count);
    DeviceArray<float> dx(x);
    gpu_->Activate(kind, dx.get(), count);
    EXPECT_LT(NormalizedError(ToDouble(want), dx.Download()), 1e-6);
  }
  std::vector<float> want = x;
  cpu_->SiluMul(want.data(), up.data(), count);
  cpu_->Add(want.data(), up.data(), count);
  DeviceArray<float> dx(x), dup(up);
  gpu_->SiluMul(dx.get(), dup.get(), count);
  gpu_->Add(dx.get(), dup.get(), count);
  EXPECT_LT(NormalizedError(ToDouble(want), dx.Download()), 1e-6);
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
    std::vector<float> q = RandomNormals(rng, static_cast<size_t>(rows) * c.heads * c.head_dim);
    std::vector<float> want_q = q;
    cpu_->Rope(want_q.data(), pos.data(), rows, c.heads, c.head_dim, inv_freq.data());
    DeviceArray<float> dq(q);
    gpu_->Rope(dq.get(), pos.data(), rows, c.heads, c.head_dim, inv_freq.data());  // host arrays
    const std::vector<float> got_q = dq.Download();
    EXPECT_LT(NormalizedError(ToDouble(want_q), got_q), 1e-6);

    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len * c.head_dim;
    const std::vector<float> k = RandomNormals(rng, kv_n), v = RandomNormals(rng, kv_n);
    std::vector<int> start(static_cast<size_t>(c.batch));
    for (int b = 0; b < c.batch; ++b) start[b] = b == 0 ? 0 : static_cast<int>(rng() % c.cache_len);
    AttentionShape shape;
    shape.batch = c.batch;
    shape.new_tokens = c.new_tokens;
    shape.num_heads = c.heads;
    shape.num_kv_heads = c.kv_heads;
    shape.head_dim = c.head_dim;
    shape.max_len = c.max_len;
    shape.cache_len = c.cache_len;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> want(want_q.size());
    cpu_->Attention(shape, want_q.data(), k.data(), v.data(), start.data(), want.data());
    DeviceArray<float> dk(k), dv(v), out(want.size());
    out.Poison();
    gpu_->Attention(shape, dq.get(), dk.get(), dv.get(), start.data(), out.get());
    EXPECT_LT(NormalizedError(ToDouble(want), out.Download()), 1e-5);
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
      const HostWeight& a = Weight(rng, static_cast<size_t>(c.m) * c.k, dtype, 1.0f);
      const HostWeight& b = Weight(rng, static_cast<size_t>(c.n) * c.k, dtype, 1.0f);
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
        DeviceBuffer da(a.values.size() * 4), db(b.values.size() * 4);
        const void* ha = dtype == DType::kF32 ? static_cast<const void*>(a.f32.data()) : a.bits.data();
        const void* hb = dtype == DType::kF32 ? static_cast<const void*>(b.f32.data()) : b.bits.data();
        const size_t elem = DTypeBytes(dtype);
        STRATA_CUDA_CHECK(cudaMemcpy(da.get(), ha, a.values.size() * elem, cudaMemcpyHostToDevice));
        STRATA_CUDA_CHECK(cudaMemcpy(db.get(), hb, b.values.size() * elem, cudaMemcpyHostToDevice));
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
