#include "src/job/shard.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata {
namespace {

TEST(ShardTest, ParsesIOverN) {
  Result<ShardSpec> s = ParseShardSpec("2/4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  EXPECT_EQ(s->ToString(), "2/4");
  for (const char* bad : {"", "4/4", "-1/4", "1/0", "1", "a/b", "1/4x", "0/70000", "1//4"}) {
    Result<ShardSpec> r = ParseShardSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("I/N"), std::string::npos);
  }
}

TEST(ShardTest, EveryLineHasExactlyOneShardAndTheSplitIsBalanced) {
  std::vector<int> counts(4);
  for (int i = 0; i < 4000; ++i) {
    const int s = ShardOf("req-" + std::to_string(i), i + 1, 4);
    ASSERT_GE(s, 0);
    ASSERT_LT(s, 4);
    ++counts[s];
  }
  for (int c : counts) EXPECT_NEAR(c, 1000, 120);
  // Stable: the same id always lands in the same shard, wherever its line is.
  EXPECT_EQ(ShardOf("abc", 1, 7), ShardOf("abc", 99, 7));
  // Lines without an id go round-robin by line number.
  EXPECT_EQ(ShardOf("", 1, 3), 0);
  EXPECT_EQ(ShardOf("", 5, 3), 1);
  EXPECT_EQ(ShardOf("anything", 5, 1), 0);
}

}  // namespace
}  // namespace strata
