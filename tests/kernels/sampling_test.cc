#include "kernels/cpu/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace strata::kernels::cpu {
namespace {

TEST(SamplerTest, GreedyTakesFirstMaximum) {
  std::vector<std::pair<float, int32_t>> scratch;
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(SampleToken(logits.data(), 4, greedy, 0, scratch), 1);
}

TEST(SamplerTest, SameSeedAndStepSameToken) {
  std::vector<std::pair<float, int32_t>> scratch;
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.37f);
  SamplingParams c;
  c.seed = 1234;
  for (uint64_t step = 0; step < 20; ++step) {
    EXPECT_EQ(SampleToken(logits.data(), 100, c, step, scratch),
              SampleToken(logits.data(), 100, c, step, scratch));
  }
}

// With temperature 1 the empirical frequencies follow softmax(logits).
TEST(SamplerTest, FrequenciesFollowSoftmax) {
  std::vector<std::pair<float, int32_t>> scratch;
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};
  SamplingParams c;
  c.seed = 7;
  std::map<int, int> counts;
  const int n = 40000;
  for (int step = 0; step < n; ++step) ++counts[SampleToken(logits.data(), 3, c, step, scratch)];
  EXPECT_NEAR(counts[0] / double(n), 1.0 / 8, 0.01);
  EXPECT_NEAR(counts[1] / double(n), 2.0 / 8, 0.01);
  EXPECT_NEAR(counts[2] / double(n), 5.0 / 8, 0.01);
}

TEST(SamplerTest, TopKAndTopPRestrictTheSupport) {
  std::vector<std::pair<float, int32_t>> scratch;
  const std::vector<float> logits = {1.0f, 4.0f, 3.0f, 2.0f, 0.0f};
  SamplingParams k2;
  k2.top_k = 2;
  SamplingParams p;
  p.top_p = 0.5f;  // token 1 alone holds ~64% of the mass
  for (int step = 0; step < 2000; ++step) {
    const int32_t a = SampleToken(logits.data(), 5, k2, step, scratch);
    EXPECT_TRUE(a == 1 || a == 2);
    EXPECT_EQ(SampleToken(logits.data(), 5, p, step, scratch), 1);
  }
}

}  // namespace
}  // namespace strata::kernels::cpu
