#include "kernels/cpu/hadamard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace strata::kernels::cpu {
namespace {

TEST(HadamardTest, IsOrthonormalAndItsOwnInverse) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int d : {1, 2, 16, 64, 128, 256}) {
    std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) a[i] = normal(rng), b[i] = normal(rng);
    std::vector<float> ra = a, rb = b;
    HadamardRotate(ra.data(), 1, d);
    HadamardRotate(rb.data(), 1, d);
    double dot = 0, rdot = 0, norm = 0;
    for (int i = 0; i < d; ++i) dot += a[i] * b[i], rdot += ra[i] * rb[i], norm += a[i] * a[i];
    EXPECT_NEAR(rdot, dot, 1e-5 * norm) << d;
    HadamardRotate(ra.data(), 1, d);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(ra[i], a[i], 1e-5f) << d;
  }
}

TEST(HadamardTest, SpreadsAnOutlierChannelOverTheHead) {
  std::vector<float> x(64, 0.0f);
  x[7] = 8.0f;
  HadamardRotate(x.data(), 1, 64);
  for (float v : x) EXPECT_FLOAT_EQ(std::fabs(v), 1.0f);  // 8 / sqrt(64)
}

TEST(HadamardTest, RotatesEveryRow) {
  std::vector<float> x = {1, 0, 0, 0, 0, 1, 0, 0};
  HadamardRotate(x.data(), 2, 4);
  const std::vector<float> want = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f, 0.5f, -0.5f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(x[i], want[i]);
}

}  // namespace
}  // namespace strata::kernels::cpu
