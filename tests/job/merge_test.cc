#include "src/job/merge.h"

#include <gtest/gtest.h>

#include "src/job/request.h"
#include "tests/job/temp_files.h"

namespace strata {
namespace {

std::string In(const std::string& id) {
  return R"({"custom_id":")" + id + R"(","prompt":"p"})" + "\n";
}
std::string Done(const std::string& id) {
  return FormatCompletionLine(Completion{id, "t-" + id, 1, 1, FinishReason::kStop}) + "\n";
}
std::string Failed(const std::string& id, uint64_t line) {
  return FormatErrorLine(RequestError{id, line, "duplicate_custom_id", "dup"}) + "\n";
}

class MergeTest : public TempDirTest {
 protected:
  Result<MergeReport> Merge(std::vector<std::string> shards, const std::string& out = "m.jsonl") {
    MergeOptions o;
    o.input = Path("in.jsonl");
    for (const std::string& s : shards) o.shard_outputs.push_back(Path(s));
    o.output = Path(out);
    return MergeShardOutputs(o);
  }
};

// Input: a, junk, a blank line, b, a (duplicate), c. Shards hold their results in any order.
TEST_F(MergeTest, JoinsInInputOrder) {
  WriteBytes(Path("in.jsonl"), In("a") + "not json\n\n" + In("b") + In("a") + In("c"));
  const std::string junk = FormatErrorLine(RequestError{"", 2, "invalid_json", "x"}) + "\n";
  const std::string blank = FormatErrorLine(RequestError{"", 3, "empty_line", "x"}) + "\n";
  WriteBytes(Path("s0.jsonl"), Done("c") + Failed("a", 5) + Done("a") + blank);
  WriteBytes(Path("s1.jsonl.zst"), ZstdFrame(Done("b")) + ZstdFrame(junk));
  Result<MergeReport> r = Merge({"s0.jsonl", "s1.jsonl.zst"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->lines, 6u);
  EXPECT_EQ(r->completions, 3u);
  EXPECT_EQ(r->errors, 3u);
  EXPECT_EQ(ReadBytes(Path("m.jsonl")),
            Done("a") + junk + blank + Done("b") + Failed("a", 5) + Done("c"));
  // Only the merged file is left beside the inputs.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 4);

  ASSERT_TRUE(Merge({"s0.jsonl", "s1.jsonl.zst"}, "m.jsonl.zst").ok());
  EXPECT_EQ(ReadBytes(Path("m.jsonl.zst")).substr(0, 4), "\x28\xB5\x2F\xFD");
}

TEST_F(MergeTest, MissingDuplicateAndStrayResultsAreReported) {
  WriteBytes(Path("in.jsonl"), In("a") + In("b") + In("c"));
  WriteBytes(Path("s0.jsonl"), Done("a") + Done("x"));
  WriteBytes(Path("s1.jsonl"), Done("a"));
  Result<MergeReport> r = Merge({"s0.jsonl", "s1.jsonl"});
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("custom_id \"a\" has two completions"), std::string::npos) << m;
  EXPECT_NE(m.find("input line 2 (custom_id \"b\") has no result"), std::string::npos) << m;
  EXPECT_NE(m.find("input line 3 (custom_id \"c\") has no result"), std::string::npos) << m;
  EXPECT_NE(m.find("\"x\" matches no input line"), std::string::npos) << m;
  EXPECT_FALSE(std::filesystem::exists(Path("m.jsonl")));
}

TEST_F(MergeTest, TornShardOutputIsReported) {
  WriteBytes(Path("in.jsonl"), In("a") + In("b"));
  WriteBytes(Path("s0.jsonl"), Done("a") + R"({"custom_id":"b","te)");
  Result<MergeReport> r = Merge({"s0.jsonl"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("torn line"), std::string::npos);
}

TEST_F(MergeTest, OutputMustNotBeAnInput) {
  WriteBytes(Path("in.jsonl"), In("a"));
  WriteBytes(Path("s0.jsonl"), Done("a"));
  Result<MergeReport> r = Merge({"s0.jsonl"}, "s0.jsonl");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
