#include "policy/plan.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

Plan Mixed() {
  Plan p;
  p.gpu_batch_size = 48;
  p.num_gpu_batches = 3;
  p.weight_gpu_percent = 20;
  p.weight_cpu_percent = 80;
  p.cache_gpu_percent = 0;
  p.cache_cpu_percent = 100;
  p.activation_gpu_percent = 30;
  p.activation_cpu_percent = 50;
  p.cpu_attention = true;
  p.compress_cache = true;
  p.overlap = false;
  return p;
}

TEST(PlanTest, YamlRoundTrip) {
  for (const Plan& plan : {Plan(), Mixed()}) {
    Result<Plan> back = ParsePlanYaml(PlanToYaml(plan), "<test>");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, plan);
  }
  for (CacheKeys keys : {CacheKeys::kPlain, CacheKeys::kRotated, CacheKeys::kSmoothed}) {
    Plan plan = Mixed();
    plan.cache_keys = keys;
    EXPECT_NE(PlanToYaml(plan).find(std::string("cache_keys: ") + CacheKeysName(keys)),
              std::string::npos);
    Result<Plan> back = ParsePlanYaml(PlanToYaml(plan), "<test>");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->cache_keys, keys);
  }
}

// cache_sink and cache_window round-trip, are written only when set (a plan without them reads
// as before: no key, 0 when loaded), and need the 4-bit cache and non-negative counts.
TEST(PlanTest, ExactTokensAreOptionalKeys) {
  Plan plan = Mixed();
  plan.compress_cache = true;
  EXPECT_EQ(PlanToYaml(plan).find("cache_sink"), std::string::npos);
  EXPECT_EQ(PlanToYaml(plan).find("cache_window"), std::string::npos);
  EXPECT_FALSE(plan.exact_tokens());
  plan.cache_sink = 1;
  plan.cache_window = 16;
  EXPECT_TRUE(plan.exact_tokens());
  const std::string yaml = PlanToYaml(plan);
  EXPECT_NE(yaml.find("cache_sink: 1\n"), std::string::npos);
  EXPECT_NE(yaml.find("cache_window: 16\n"), std::string::npos);
  Result<Plan> back = ParsePlanYaml(yaml, "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  EXPECT_NE(PlanToFlexGenFlags(plan).find("--compress-cache --cache-sink 1 --cache-window 16"),
            std::string::npos);
  EXPECT_NE(PlanToString(plan).find("first 1 and last 16 tokens exact"), std::string::npos);

  Plan fp32 = plan;
  fp32.compress_cache = false;
  ASSERT_FALSE(fp32.Validate().ok());
  EXPECT_NE(fp32.Validate().message().find("need compress_cache"), std::string::npos);
  Plan negative = plan;
  negative.cache_window = -1;
  ASSERT_FALSE(negative.Validate().ok());
  EXPECT_NE(negative.Validate().message().find("must be at least 0"), std::string::npos);
}

TEST(PlanTest, CacheKeysDefaultToSmoothedAndRotated) {
  Plan p;
  EXPECT_EQ(p.cache_keys, CacheKeys::kSmoothed);
  EXPECT_FALSE(p.rotate_keys());  // no 4-bit cache, no key transform
  EXPECT_FALSE(p.smooth_keys());
  p.compress_cache = true;
  EXPECT_TRUE(p.rotate_keys());
  EXPECT_TRUE(p.smooth_keys());
  p.cache_keys = CacheKeys::kRotated;
  EXPECT_TRUE(p.rotate_keys());
  EXPECT_FALSE(p.smooth_keys());
  p.cache_keys = CacheKeys::kPlain;
  EXPECT_FALSE(p.rotate_keys());
  EXPECT_FALSE(p.smooth_keys());
  EXPECT_EQ(*ParseCacheKeys("rotated"), CacheKeys::kRotated);
  Result<CacheKeys> bad = ParseCacheKeys("hadamard");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("plain"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'hadamard'"), std::string::npos);
}

TEST(PlanTest, DiskTakesTheRest) {
  const Plan p = Mixed();
  EXPECT_EQ(p.weight_disk_percent(), 0);
  EXPECT_EQ(p.activation_disk_percent(), 20);
  EXPECT_EQ(p.block_size(), 144);
}

TEST(PlanTest, ValidateNamesTheField) {
  Plan p;
  p.gpu_batch_size = 0;
  EXPECT_NE(p.Validate().message().find("gpu_batch_size"), std::string::npos);
  p = Plan();
  p.num_gpu_batches = -2;
  EXPECT_NE(p.Validate().message().find("num_gpu_batches"), std::string::npos);
  p = Plan();
  p.cache_gpu_percent = 60;
  p.cache_cpu_percent = 50;
  EXPECT_NE(p.Validate().message().find("cache_gpu_percent + cache_cpu_percent"),
            std::string::npos);
  p = Plan();
  p.activation_cpu_percent = -1;
  EXPECT_NE(p.Validate().message().find("activation_cpu_percent"), std::string::npos);
  EXPECT_TRUE(Mixed().Validate().ok());
}

TEST(PlanTest, FlexGenFlags) {
  Result<Plan> p = PlanFromFlexGenPercent({20, 80, 0, 100, 0, 100}, 48, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->weight_cpu_percent, 80);
  EXPECT_EQ(p->cache_disk_percent(), 0);
  EXPECT_EQ(PlanToFlexGenFlags(*p),
            "--percent 20 80 0 100 0 100 --gpu-batch-size 48 --num-gpu-batches 3");
  EXPECT_FALSE(PlanFromFlexGenPercent({20, 80, 0}, 1, 1).ok());
  EXPECT_FALSE(PlanFromFlexGenPercent({70, 80, 0, 100, 0, 100}, 1, 1).ok());
  EXPECT_NE(PlanToFlexGenFlags(Mixed()).find("--cpu-attention --compress-cache --no-overlap"),
            std::string::npos);
  Plan plain = Mixed();
  plain.cache_keys = CacheKeys::kPlain;
  EXPECT_NE(PlanToFlexGenFlags(plain).find("--compress-cache --cache-keys plain --no-overlap"),
            std::string::npos);
}

TEST(PlanTest, BadYamlSaysWhatAndWhere) {
  const std::string good = PlanToYaml(Mixed());
  auto message = [](const std::string& text) {
    Result<Plan> p = ParsePlanYaml(text, "plan.yaml");
    EXPECT_FALSE(p.ok());
    return p.status().message();
  };
  std::string missing = good.substr(good.find('\n') + 1);  // drops gpu_batch_size
  EXPECT_NE(message(missing).find("plan.yaml: missing key 'gpu_batch_size'"), std::string::npos);
  EXPECT_NE(message(good + "gpu_batchsize: 3\n").find("unknown key 'gpu_batchsize'"),
            std::string::npos);
  std::string bad_bool = good;
  bad_bool.replace(bad_bool.find("overlap: false"), 14, "overlap: maybe");
  EXPECT_NE(message(bad_bool).find("'overlap' must be true or false"), std::string::npos);
  std::string bad_int = good;
  bad_int.replace(bad_int.find("num_gpu_batches: 3"), 18, "num_gpu_batches: 2.5");
  EXPECT_NE(message(bad_int).find("'num_gpu_batches' must be a whole number"), std::string::npos);
  EXPECT_NE(message("- 1\n- 2\n").find("must be a map"), std::string::npos);
  EXPECT_NE(message("a: [1, 2").find("not valid YAML"), std::string::npos);
  std::string over = good;
  over.replace(over.find("activation_gpu_percent: 30"), 26, "activation_gpu_percent: 90");
  EXPECT_NE(message(over).find("plan.yaml: activation_gpu_percent + activation_cpu_percent"),
            std::string::npos);
  std::string bad_keys = good;
  bad_keys.replace(bad_keys.find("cache_keys: smoothed"), 20, "cache_keys: hadamard");
  EXPECT_NE(message(bad_keys).find("plan.yaml: cache_keys: cache keys must be plain"),
            std::string::npos);
  EXPECT_EQ(LoadPlanYaml("/nonexistent/plan.yaml").status().code(), StatusCode::kNotFound);
}

TEST(PlanTest, PrintsForPeople) {
  const std::string text = PlanToString(Mixed());
  EXPECT_NE(text.find("144 sequences = 48 per micro-batch x 3 micro-batches"), std::string::npos);
  EXPECT_NE(text.find("activations  GPU  30%  CPU  50%  disk  20%"), std::string::npos);
  EXPECT_NE(text.find("KV cache 4-bit, smoothed keys"), std::string::npos);
}

}  // namespace
}  // namespace strata
