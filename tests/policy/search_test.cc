#include "policy/search.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace strata {
namespace {

ModelSpec Preset(const std::string& name) {
  return LoadModelSpecYaml(ResolveConfigFile("models", name).value()).value();
}

HardwareSpec Profile(const std::string& name) {
  return LoadHardwareSpecYaml(ResolveConfigFile("hardware", name).value()).value();
}

// Every preset on every profile: the search finds a plan that fits, that no other plan it
// reports beats, and prints how long a full search (all combinations) took.
TEST(SearchTest, FindsAFittingPlanForEveryPresetAndProfile) {
  for (const char* hw_name : {"t4-flexgen", "t4", "a10", "l4", "a100-80g", "h100-80g"}) {
    const HardwareSpec hw = Profile(hw_name);
    for (const char* model_name : {"opt-6.7b", "opt-30b", "opt-66b", "opt-175b", "llama-2-7b",
                                   "llama-2-70b", "llama-3-8b", "llama-3-70b"}) {
      const Workload w{512, 32, 0};
      Result<SearchResult> r = SearchPlan(Preset(model_name), w, hw, SearchOptions());
      if (!r.ok()) {
        std::printf("%-10s %-12s %s\n", hw_name, model_name, r.status().ToString().c_str());
        EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
        continue;
      }
      EXPECT_TRUE(r->best.fits.ok());
      for (const PlanEvaluation& alt : r->alternatives) {
        EXPECT_TRUE(alt.fits.ok());
        EXPECT_LE(alt.cost.throughput_tokens_per_s, r->best.cost.throughput_tokens_per_s);
      }
      std::printf("%-10s %-12s %9.3f tokens/s  %-72s %4d LPs %6.3f s\n", hw_name, model_name,
                  r->best.cost.throughput_tokens_per_s, PlanToFlexGenFlags(r->best.plan).c_str(),
                  r->lps_solved, r->elapsed_s);
    }
  }
}

// The search beats simple hand plans that fit.
TEST(SearchTest, AtLeastAsGoodAsHandPlansThatFit) {
  const HardwareSpec hw = Profile("a10");
  const ModelSpec m = Preset("llama-2-70b");
  const Workload w{256, 64, 256};
  Result<SearchResult> r = SearchPlan(m, w, hw, SearchOptions());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int fitting = 0;
  for (int gbs : {4, 16, 32}) {
    for (int nb : {1, 4, 8}) {
      for (const std::vector<int>& percent : {std::vector<int>{0, 100, 0, 100, 100, 0},
                                              {10, 60, 50, 50, 100, 0},
                                              {0, 50, 0, 100, 0, 100}}) {
        Plan hand = PlanFromFlexGenPercent(percent, gbs, nb).value();
        for (bool q4 : {false, true}) {
          hand.compress_weight = hand.compress_cache = q4;
          Result<PlanEvaluation> e = EvaluatePlan(m, w, hand, hw);
          ASSERT_TRUE(e.ok());
          if (!e->fits.ok()) continue;
          ++fitting;
          EXPECT_GE(r->best.cost.throughput_tokens_per_s,
                    e->cost.throughput_tokens_per_s * (1 - 1e-9))
              << PlanToFlexGenFlags(hand);
        }
      }
    }
  }
  EXPECT_GT(fitting, 10);
}

TEST(SearchTest, NothingFitsNamesTheConstraint) {
  HardwareSpec hw = Profile("t4");
  hw.disk_capacity_bytes = 5'000'000'000;  // with the GPU and CPU, 30 GB: less than even the
  hw.cpu_capacity_bytes = 10'000'000'000;  // 40 GB of Llama-3-70B's weights at 4 bits
  Result<SearchResult> r = SearchPlan(Preset("llama-3-70b"), {512, 32, 0}, hw, SearchOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("all tiers together"), std::string::npos)
      << r.status().message();
}

TEST(SearchTest, RespectsOptions) {
  SearchOptions no_tricks;
  no_tricks.allow_compress_weight = no_tricks.allow_compress_cache = false;
  no_tricks.allow_cpu_attention = false;
  Result<SearchResult> r =
      SearchPlan(Preset("opt-30b"), {512, 32, 0}, Profile("t4-flexgen"), no_tricks);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->best.plan.compress_weight || r->best.plan.compress_cache ||
               r->best.plan.cpu_attention);
  EXPECT_TRUE(r->alternatives.empty());
}

}  // namespace
}  // namespace strata
