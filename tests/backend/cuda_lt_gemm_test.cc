// LtGemm (src/backend/cuda/gemm_lt.h), the CUDA backend's tensor-core GEMMs, against an fp64
// reference on the same half inputs: every epilogue, fp16 and bf16 inputs, y of the inputs' type
// and fp32, shapes from one row to odd sizes; and the plans: one per shape, kept, and another
// where an operand's alignment differs. The reference's only difference from an fp32-accumulated
// GEMM rounded once is that rounding: u / sqrt(3) in RMS for unit roundoff u (fp16 2.8e-4, bf16
// 2.3e-3), bounded here by 2e-3 and 1e-2; an fp32 y by 1e-5 (fp32 sums of at most 1,000 terms).
#include <cstdint>
#include <random>
#include <vector>

#include "src/backend/cuda/gemm_lt.h"
#include "src/backend/cuda/gemm_plans.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {
namespace {

using LtGemmTest = GpuTest;

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

std::vector<uint16_t> Bits(const std::vector<float>& v, SpanType type) {
  return type == SpanType::kF16 ? ToHalfBits(v) : ToBf16Bits(v);
}

float Value(uint16_t bits, SpanType type) {
  return type == SpanType::kF16 ? HalfToFloat(bits) : Bf16ToFloat(bits);
}

// The values `v` takes in `type` (fp32 as it is).
std::vector<float> Rounded(const std::vector<float>& v, SpanType type) {
  if (type == SpanType::kF32) return v;
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = Value(Bits({v[i]}, type)[0], type);
  return r;
}

// y[m, n] = x[m, k] w[n, k]^T + bias, then ReLU, in fp64.
std::vector<double> Reference(const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>* bias, bool relu, int m, int n, int k) {
  std::vector<double> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = bias != nullptr ? (*bias)[j] : 0.0;
      const float* xi = &x[static_cast<size_t>(i) * k];
      const float* wj = &w[static_cast<size_t>(j) * k];
      for (int p = 0; p < k; ++p) sum += static_cast<double>(xi[p]) * wj[p];
      y[static_cast<size_t>(i) * n + j] = relu && sum < 0 ? 0.0 : sum;
    }
  }
  return y;
}

// Device bytes holding `v` in `type` (16-bit, or fp32), `offset` bytes past an aligned start.
class Operand {
 public:
  Operand(const std::vector<float>& v, SpanType type, size_t offset = 0)
      : type_(type), offset_(offset), count_(v.size()), buffer_(Bytes() + offset + 256) {
    const std::vector<uint16_t> bits =
        type == SpanType::kF32 ? std::vector<uint16_t>() : Bits(v, type);
    const void* src = type == SpanType::kF32 ? static_cast<const void*>(v.data()) : bits.data();
    STRATA_CUDA_CHECK(cudaMemcpy(get(), src, Bytes(), cudaMemcpyHostToDevice));
  }
  void* get() const { return buffer_.as<uint8_t>() + offset_; }
  std::vector<float> Read() const {
    STRATA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(count_);
    if (type_ == SpanType::kF32) {
      STRATA_CUDA_CHECK(cudaMemcpy(out.data(), get(), Bytes(), cudaMemcpyDeviceToHost));
      return out;
    }
    std::vector<uint16_t> bits(count_);
    STRATA_CUDA_CHECK(cudaMemcpy(bits.data(), get(), Bytes(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count_; ++i) out[i] = Value(bits[i], type_);
    return out;
  }

 private:
  size_t Bytes() const { return count_ * SpanElementBytes(type_); }
  SpanType type_;
  size_t offset_;
  size_t count_;
  DeviceBuffer buffer_;
};

double Tolerance(SpanType output) {
  return output == SpanType::kF32 ? 1e-5 : output == SpanType::kF16 ? 2e-3 : 1e-2;
}

TEST_F(LtGemmTest, EveryEpilogueAndTypeMatchesFp64) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  LtGemm lt;
  DeviceBuffer workspace(kWorkspaceBytes);
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{1, 64, 64}, Shape{16, 1024, 512}, Shape{200, 768, 256},
                        Shape{7, 40, 24}, Shape{64, 4096, 1000}}) {
    for (SpanType inputs : {SpanType::kF16, SpanType::kBF16}) {
      for (SpanType output : {inputs, SpanType::kF32}) {
        for (bool with_bias : {false, true}) {
          for (bool relu : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << s.m << "x" << s.n << "x" << s.k << " " << SpanTypeName(inputs)
                         << " y " << SpanTypeName(output) << " bias " << with_bias << " relu "
                         << relu);
            const std::vector<float> x =
                Rounded(RandomNormals(rng, static_cast<size_t>(s.m) * s.k), inputs);
            const std::vector<float> w =
                Rounded(RandomNormals(rng, static_cast<size_t>(s.n) * s.k, 0.05f), inputs);
            const std::vector<float> b = Rounded(RandomNormals(rng, s.n, 0.5f), output);
            const Operand dx(x, inputs), dw(w, inputs), db(b, output);
            Operand dy(std::vector<float>(static_cast<size_t>(s.m) * s.n, -7.0f), output);
            const GemmOperands operands{dx.get(), dw.get(), with_bias ? db.get() : nullptr,
                                        dy.get()};
            const LtGemmKey key = LtGemmKeyOf(s.m, s.n, s.k, inputs, output, relu, operands);
            // Every shape here has 16-byte rows or is small; cuBLASLt runs them all.
            ASSERT_TRUE(lt.Run(key, operands, workspace.get(), kWorkspaceBytes, nullptr));
            const std::vector<float> got = dy.Read();
            EXPECT_LT(NormalizedError(Reference(x, w, with_bias ? &b : nullptr, relu, s.m, s.n,
                                                s.k),
                                      got),
                      Tolerance(output));
            if (relu) {
              for (size_t i = 0; i < got.size(); ++i) ASSERT_GE(got[i], 0.0f) << i;
            }
          }
        }
      }
    }
  }
}

// The heuristic is asked once per shape: running a shape again adds no plan, a new shape or an
// operand aligned to fewer bytes (x 2 bytes past a 256-byte boundary) adds one, and that
// misaligned operand is read right.
TEST_F(LtGemmTest, PlansAreKeptPerShapeAndAlignment) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  LtGemm lt;
  DeviceBuffer workspace(kWorkspaceBytes);
  const int m = 24, n = 512, k = 256;
  const std::vector<float> x = Rounded(RandomNormals(rng, size_t{m} * k), SpanType::kF16);
  const std::vector<float> w = Rounded(RandomNormals(rng, size_t{n} * k, 0.05f), SpanType::kF16);
  const std::vector<double> want = Reference(x, w, nullptr, false, m, n, k);
  const Operand dx(x, SpanType::kF16), dw(w, SpanType::kF16);
  const Operand shifted(x, SpanType::kF16, /*offset=*/2);
  Operand dy(std::vector<float>(size_t{m} * n), SpanType::kF16);
  EXPECT_EQ(lt.planned(), 0u);
  auto run = [&](const Operand& xo, int rows) {
    const GemmOperands operands{xo.get(), dw.get(), nullptr, dy.get()};
    const LtGemmKey key =
        LtGemmKeyOf(rows, n, k, SpanType::kF16, SpanType::kF16, false, operands);
    return lt.Run(key, operands, workspace.get(), kWorkspaceBytes, nullptr);
  };
  ASSERT_TRUE(run(dx, m));
  EXPECT_EQ(lt.planned(), 1u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(run(dx, m));
  EXPECT_EQ(lt.planned(), 1u);
  EXPECT_LT(NormalizedError(want, dy.Read()), Tolerance(SpanType::kF16));
  ASSERT_TRUE(run(dx, m / 2));
  EXPECT_EQ(lt.planned(), 2u);
  EXPECT_EQ(AlignmentOf(shifted.get()), 2u);
  if (run(shifted, m)) {
    EXPECT_LT(NormalizedError(want, dy.Read()), Tolerance(SpanType::kF16));
  }
  EXPECT_EQ(lt.planned(), 3u);
  run(shifted, m);
  EXPECT_EQ(lt.planned(), 3u);
}

}  // namespace
}  // namespace strata::testing
