// The CPU GELU (kernels/cpu/activation.h) against fp64 within GeluErrorBound (gelu_bound.h), the
// bound its CUDA twin is held to in elementwise_ops_test.cc, and the bound itself: loose enough
// for a correct fp32 formula along the negative tail, tight enough for a wrong one. Runs without
// a GPU.
#include "tests/backend/gelu_bound.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cpu/activation.h"

namespace strata::testing {
namespace {

std::vector<float> CpuGelu(std::vector<float> x) {
  kernels::cpu::Gelu(x.data(), x.size());
  return x;
}

// Every multiple of 1/4096 in [lo, hi].
std::vector<float> Grid(int lo, int hi) {
  std::vector<float> x;
  for (int i = lo * 4096; i <= hi * 4096; ++i) x.push_back(static_cast<float>(i) / 4096.0f);
  return x;
}

// Issue 28: with STRATA_TEST_SEED=295997207, ActivationsMatchFp64AndCpu's single-element case
// drew x = -3.2454686 (its inputs come from the seed on the host, so the CPU sees the same one).
// Both fp32 GELUs missed fp64 by 2.3e-5 relative, failing a 1e-6 relative bound; the error is
// the cancellation in 1 + erf, within GeluErrorBound.
TEST(GeluBoundTest, TheIssueInputFailsARelativeBoundButNotTheGeluBound) {
  const std::vector<float> x = {-3.24546862f};
  const std::vector<double> ref = GeluFp64(x);
  const std::vector<float> got = CpuGelu(x);
  EXPECT_GT(std::abs(got[0] - ref[0]) / std::abs(ref[0]), 1e-6);
  size_t at = 0;
  EXPECT_LE(WorstGeluError(x, ref, got, 1.0, &at), 1.0);
}

// The negative tail, where 1 + erf cancels down to nothing (erf is -1 in fp32 below -5.9), and
// the rest of the range up to where GELU is x.
TEST(GeluBoundTest, CpuGeluIsWithinTheBoundAlongTheNegativeTailAndBeyond) {
  for (const auto& [lo, hi] : {std::pair{-12, -2}, std::pair{-2, 6}}) {
    SCOPED_TRACE(::testing::Message() << "[" << lo << ", " << hi << "]");
    const std::vector<float> x = Grid(lo, hi);
    const std::vector<double> ref = GeluFp64(x);
    const std::vector<float> got = CpuGelu(x);
    size_t at = 0;
    const double worst = WorstGeluError(x, ref, got, 1.0, &at);
    EXPECT_LE(worst, 1.0) << "x " << x[at] << " got " << got[at] << " fp64 " << ref[at];
  }
}

// A wrong formula and a wrong element fail it.
TEST(GeluBoundTest, TheBoundCatchesAWrongFormulaAndAWrongElement) {
  const std::vector<float> x = Grid(-12, 6);
  const std::vector<double> ref = GeluFp64(x);
  std::vector<float> tanh_gelu(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    tanh_gelu[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
  size_t at = 0;
  EXPECT_GT(WorstGeluError(x, ref, tanh_gelu, 1.0, &at), 10.0);

  std::vector<float> swapped = CpuGelu(x);
  const size_t i = 8 * 4096;                 // in the tail, x = -4
  std::swap(swapped[i], swapped[i + 4096]);  // and x = -3
  EXPECT_GT(WorstGeluError(x, ref, swapped, 1.0, &at), 1.0);
  EXPECT_TRUE(at == i || at == i + 4096) << at;
}

}  // namespace
}  // namespace strata::testing
