// GemmNT's contract: every element summed in one fixed order (GemmNTElement), so a row's result
// does not depend on the rows it is computed with, the thread count or the instruction set, and
// the sum is a good one (fp64 reference). OpenBLAS 0.3.21 broke the first of these on AVX-512
// CPUs and failed CI there (a block cut into micro-batches gave other 4-bit-cache tokens).
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace strata::kernels::cpu {
namespace {

struct Shape {
  int m, n, k;
};

// Tails everywhere: rows and columns not multiples of the 4 x 4 register block or the 64 x 64
// tile, depths below, at and above whole 16-lane steps.
const Shape kShapes[] = {{1, 1, 1},     {3, 5, 15},    {4, 4, 16},     {7, 9, 17},
                         {37, 64, 64},  {65, 67, 100}, {130, 70, 576}, {2, 300, 1000},
                         {1, 1000, 33}, {66, 129, 160}};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<GemmIsa> AvailablePaths() {
  std::vector<GemmIsa> paths;
  for (GemmIsa isa : {GemmIsa::kScalar, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    if (GemmIsaAvailable(isa)) paths.push_back(isa);
  }
  return paths;
}

bool BitEqual(const float* x, const float* y, size_t n) {
  return std::memcmp(x, y, n * sizeof(float)) == 0;
}

TEST(GemmTest, EveryPathIsTheFixedOrderBitForBit) {
  for (const Shape& s : kShapes) {
    const auto a = Random(static_cast<size_t>(s.m) * s.k, 1);
    const auto b = Random(static_cast<size_t>(s.n) * s.k, 2);
    std::vector<float> want(static_cast<size_t>(s.m) * s.n);
    for (int i = 0; i < s.m; ++i) {
      for (int j = 0; j < s.n; ++j) {
        want[static_cast<size_t>(i) * s.n + j] =
            GemmNTElement(s.k, a.data() + static_cast<size_t>(i) * s.k,
                          b.data() + static_cast<size_t>(j) * s.k);
      }
    }
    for (GemmIsa isa : AvailablePaths()) {
      SCOPED_TRACE(std::string(GemmIsaName(isa)) + " " + std::to_string(s.m) + "x" +
                   std::to_string(s.n) + "x" + std::to_string(s.k));
      std::vector<float> c(want.size(), NAN);
      GemmNT(s.m, s.n, s.k, a.data(), b.data(), c.data(), s.n, false, isa);
      EXPECT_TRUE(BitEqual(c.data(), want.data(), c.size()));
    }
  }
}

// What rule 3 needs: a row computed alone, or with other rows around it, or by another number of
// threads, comes out the same.
TEST(GemmTest, ARowsResultDoesNotDependOnWhatItIsBatchedWith) {
  const int n = 200, k = 300;
  const auto b = Random(static_cast<size_t>(n) * k, 3);
  const auto a = Random(static_cast<size_t>(97) * k, 4);
  for (GemmIsa isa : AvailablePaths()) {
    SCOPED_TRACE(GemmIsaName(isa));
    std::vector<float> whole(static_cast<size_t>(97) * n);
    GemmNT(97, n, k, a.data(), b.data(), whole.data(), n, false, isa);
    for (int first : {0, 5, 63, 96}) {
      for (int rows : {1, 2, 3, 33}) {
        if (first + rows > 97) continue;
        std::vector<float> part(static_cast<size_t>(rows) * n);
        GemmNT(rows, n, k, a.data() + static_cast<size_t>(first) * k, b.data(), part.data(), n,
               false, isa);
        EXPECT_TRUE(BitEqual(part.data(), whole.data() + static_cast<size_t>(first) * n,
                             part.size()))
            << "rows " << first << "+" << rows;
      }
    }
    const int threads = omp_get_max_threads();
    for (int t : {1, 3}) {
      omp_set_num_threads(t);
      std::vector<float> again(whole.size());
      GemmNT(97, n, k, a.data(), b.data(), again.data(), n, false, isa);
      EXPECT_TRUE(BitEqual(again.data(), whole.data(), whole.size())) << t << " threads";
    }
    omp_set_num_threads(threads);
  }
}

TEST(GemmTest, MatchesFp64AndAccumulatesIntoAStridedC) {
  const int m = 45, n = 70, k = 333, ldc = 80;
  const auto a = Random(static_cast<size_t>(m) * k, 5);
  const auto b = Random(static_cast<size_t>(n) * k, 6);
  const auto c0 = Random(static_cast<size_t>(m) * ldc, 7);
  std::vector<float> c = c0;
  GemmNT(m, n, k, a.data(), b.data(), c.data(), ldc, true);
  double worst = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i) * ldc + j;
      if (j >= n) {  // beyond the n columns: untouched
        EXPECT_EQ(c[at], c0[at]);
        continue;
      }
      double sum = c0[at], magnitude = std::fabs(c0[at]);
      for (int t = 0; t < k; ++t) {
        const double p = static_cast<double>(a[static_cast<size_t>(i) * k + t]) *
                         b[static_cast<size_t>(j) * k + t];
        sum += p;
        magnitude += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(c[at] - sum) / magnitude);
    }
  }
  // Pairwise-ish summation over 333 terms: a few ulps of the magnitude, far below 1e-5.
  EXPECT_LT(worst, 1e-6);
}

}  // namespace
}  // namespace strata::kernels::cpu
