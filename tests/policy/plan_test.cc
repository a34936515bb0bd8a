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
  for (CacheKeys keys :
       {CacheKeys::kPlain, CacheKeys::kRotated, CacheKeys::kSmoothed, CacheKeys::kChannel}) {
    Plan plan = Mixed();
    plan.cache_keys = keys;
    EXPECT_NE(PlanToYaml(plan).find(std::string("cache_keys: ") + CacheKeysName(keys)),
              std::string::npos);
    Result<Plan> back = ParsePlanYaml(PlanToYaml(plan), "<test>");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->cache_keys, keys);
  }
}

// cache_sink and cache_window round-trip and are always written; the FlexGen flags and the
// description name them when they are not the defaults. A plan file without them (written when
// they were only written when not 0) reads 0 for them, as it meant.
TEST(PlanTest, ExactTokensAreWrittenAndZeroWhenAbsent) {
  Plan plan = Mixed();
  EXPECT_TRUE(plan.exact_tokens());
  const std::string yaml = PlanToYaml(plan);
  EXPECT_NE(yaml.find("cache_sink: 1\n"), std::string::npos);
  EXPECT_NE(yaml.find("cache_window: 32\n"), std::string::npos);
  EXPECT_EQ(PlanToFlexGenFlags(plan).find("--cache-sink"), std::string::npos);
  EXPECT_EQ(PlanToFlexGenFlags(plan).find("--cache-window"), std::string::npos);
  EXPECT_NE(PlanToString(plan).find("first 1 and last 32 tokens exact"), std::string::npos);

  plan.cache_keys = CacheKeys::kSmoothed;
  plan.cache_sink = 2;
  plan.cache_window = 16;
  Result<Plan> back = ParsePlanYaml(PlanToYaml(plan), "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  EXPECT_NE(PlanToFlexGenFlags(plan).find(
                "--compress-cache --cache-keys smoothed --cache-sink 2 --cache-window 16"),
            std::string::npos);
  plan.cache_sink = plan.cache_window = 0;  // not the defaults, so said
  EXPECT_FALSE(plan.exact_tokens());
  EXPECT_NE(PlanToFlexGenFlags(plan).find("--cache-sink 0 --cache-window 0"), std::string::npos);
  EXPECT_EQ(PlanToString(plan).find("tokens exact"), std::string::npos);

  std::string old = PlanToYaml(Mixed());
  for (const char* line : {"cache_sink: 1\n", "cache_window: 32\n"}) {
    old.erase(old.find(line), std::string(line).size());
  }
  const std::string channel = old;
  old.replace(old.find("cache_keys: channel"), 19, "cache_keys: smoothed");
  back = ParsePlanYaml(old, "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cache_sink, 0);
  EXPECT_EQ(back->cache_window, 0);
  back = ParsePlanYaml(channel, "old.yaml");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("old.yaml: cache_window is 0"), std::string::npos)
      << back.status().message();
}

// Counts must not be negative; without the 4-bit cache they are unused, so the defaults (or
// any count) are fine.
TEST(PlanTest, ExactTokensNeedNonNegativeCounts) {
  Plan fp32;
  ASSERT_FALSE(fp32.compress_cache);
  EXPECT_TRUE(fp32.Validate().ok()) << fp32.Validate().message();
  EXPECT_FALSE(fp32.exact_tokens());
  Plan negative = Mixed();
  negative.cache_window = -1;
  ASSERT_FALSE(negative.Validate().ok());
  EXPECT_NE(negative.Validate().message().find("must be at least 0"), std::string::npos);
}

// Channel keys read the unfinished group from the exact window, so it must hold a whole group;
// other keys take any window, and without the 4-bit cache it is unused.
TEST(PlanTest, ChannelKeysNeedAWindowOfAGroup) {
  Plan p = Mixed();
  ASSERT_TRUE(p.channel_keys());
  p.cache_window = kChannelKeyGroup - 1;
  const Status s = p.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("group of 32 tokens"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--cache-window 32 or more, or --cache-keys smoothed"),
            std::string::npos)
      << s.message();
  p.cache_window = kChannelKeyGroup;
  EXPECT_TRUE(p.Validate().ok());
  p.cache_window = 0;
  p.cache_keys = CacheKeys::kSmoothed;
  EXPECT_TRUE(p.Validate().ok());
  p.cache_keys = CacheKeys::kChannel;
  p.compress_cache = false;
  EXPECT_TRUE(p.Validate().ok());
}

TEST(PlanTest, CacheKeysDefaultToChannel) {
  Plan p;
  EXPECT_EQ(p.cache_keys, CacheKeys::kChannel);
  EXPECT_EQ(p.cache_sink, 1);
  EXPECT_EQ(p.cache_window, 32);
  EXPECT_FALSE(p.rotate_keys());  // no 4-bit cache, no key transform
  EXPECT_FALSE(p.smooth_keys());
  EXPECT_FALSE(p.channel_keys());
  p.compress_cache = true;
  EXPECT_FALSE(p.rotate_keys());
  EXPECT_FALSE(p.smooth_keys());
  EXPECT_TRUE(p.channel_keys());
  p.cache_keys = CacheKeys::kSmoothed;
  EXPECT_TRUE(p.rotate_keys());
  EXPECT_TRUE(p.smooth_keys());
  EXPECT_FALSE(p.channel_keys());
  p.cache_keys = CacheKeys::kRotated;
  EXPECT_TRUE(p.rotate_keys());
  EXPECT_FALSE(p.smooth_keys());
  p.cache_keys = CacheKeys::kPlain;
  EXPECT_FALSE(p.rotate_keys());
  EXPECT_FALSE(p.smooth_keys());
  EXPECT_FALSE(p.channel_keys());
  EXPECT_EQ(*ParseCacheKeys("rotated"), CacheKeys::kRotated);
  EXPECT_EQ(*ParseCacheKeys("channel"), CacheKeys::kChannel);
  EXPECT_STREQ(CacheKeysName(CacheKeys::kChannel), "channel");
  Result<CacheKeys> bad = ParseCacheKeys("hadamard");
  ASSERT_FALSE(bad.ok());
  for (const char* choice : {"channel", "smoothed", "rotated", "plain", "'hadamard'"}) {
    EXPECT_NE(bad.status().message().find(choice), std::string::npos) << choice;
  }
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
  bad_keys.replace(bad_keys.find("cache_keys: channel"), 19, "cache_keys: hadamard");
  EXPECT_NE(message(bad_keys).find("plan.yaml: cache_keys: cache keys must be channel"),
            std::string::npos);
  EXPECT_EQ(LoadPlanYaml("/nonexistent/plan.yaml").status().code(), StatusCode::kNotFound);
}

TEST(PlanTest, PrintsForPeople) {
  const std::string text = PlanToString(Mixed());
  EXPECT_NE(text.find("144 sequences = 48 per micro-batch x 3 micro-batches"), std::string::npos);
  EXPECT_NE(text.find("activations  GPU  30%  CPU  50%  disk  20%"), std::string::npos);
  EXPECT_NE(text.find("KV cache 4-bit, channel keys, first 1 and last 32 tokens exact"),
            std::string::npos);
}

}  // namespace
}  // namespace strata
