// `strata run` end to end through the binary: completions, error lines for bad requests beside
// good ones, resume, and clear failures for unusable configuration.
#include <gtest/gtest.h>

#include <set>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

const std::string kModel = kFixtureModel + "llama-gqa";

std::string Req(const std::string& id, const std::string& prompt, int max_tokens = 6) {
  return R"({"custom_id":")" + id + R"(","prompt":")" + prompt + R"(","max_tokens":)" +
         std::to_string(max_tokens) + R"(,"temperature":0})" + "\n";
}

TEST_F(CliTest, CompletesEveryRequestInOrder) {
  Write("in.jsonl", Req("a", "Hello") + Req("b", "The children run") + Req("c", "Once upon", 3));
  // --sort-window 0: blocks in input order, so the output is in input order too.
  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl") + " --batch-size 2" +
                                " --sort-window 0");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto lines = ReadJsonLines(Path("out.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["custom_id"], "a");
  EXPECT_EQ(lines[1]["custom_id"], "b");
  EXPECT_EQ(lines[2]["custom_id"], "c");
  EXPECT_EQ(lines[2]["completion_tokens"], 3);
  EXPECT_EQ(lines[2]["finish_reason"], "length");
  EXPECT_GT(lines[0]["prompt_tokens"].get<int>(), 1);
  EXPECT_TRUE(lines[0]["text"].is_string());
}

// Greedy output does not depend on how requests are grouped into blocks (block order may differ:
// blocks are sorted by prompt length).
TEST_F(CliTest, BlockSizeDoesNotChangeGreedyText) {
  std::string in;
  for (int i = 0; i < 5; ++i) in += Req("r" + std::to_string(i), std::string(i + 1, 'x') + " yes", 8);
  Write("in.jsonl", in);
  for (const char* bs : {"1", "5"}) {
    const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                  " --output " + Path(std::string("out") + bs + ".jsonl") +
                                  " --batch-size " + bs);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }
  EXPECT_EQ(SortedLines(ReadFile(Path("out1.jsonl"))), SortedLines(ReadFile(Path("out5.jsonl"))));
}

TEST_F(CliTest, BadLinesGetErrorLinesAndGoodLinesStillComplete) {
  Write("in.jsonl", Req("good1", "Hello") + "{not json\n" + R"({"custom_id":"neg","prompt":"x","max_tokens":-3})" +
                        "\n" + Req("good2", "The quick") + Req("good1", "duplicate") +
                        Req("huge", "far too long for the context", 1000) + "[1,2]\n");
  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  const auto lines = ReadJsonLines(Path("out.jsonl"));
  ASSERT_EQ(lines.size(), 7u);
  std::set<std::string> codes;
  int completed = 0;
  for (const auto& l : lines) {
    if (l.contains("error")) {
      codes.insert(l["error"]["code"].get<std::string>());
      EXPECT_FALSE(l["error"]["message"].get<std::string>().empty());
    } else {
      ++completed;
    }
  }
  EXPECT_EQ(completed, 2);
  EXPECT_EQ(codes, (std::set<std::string>{"invalid_json", "invalid_max_tokens", "duplicate_custom_id",
                                          "context_length_exceeded", "not_an_object"}));
}

TEST_F(CliTest, RerunResumesWithoutDuplicates) {
  Write("in.jsonl", Req("a", "Hello") + Req("b", "Bye") + Req("c", "Why"));
  // An earlier run answered "a" and died while writing "b".
  Write("out.jsonl", R"({"custom_id":"a","text":"x","prompt_tokens":1,"completion_tokens":1,"finish_reason":"length"})"
                     "\n{\"custom_id\":\"b\",\"te");
  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto lines = ReadJsonLines(Path("out.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["text"], "x");  // kept, not recomputed
  EXPECT_EQ(lines[1]["custom_id"], "b");
  EXPECT_EQ(lines[2]["custom_id"], "c");
}

TEST_F(CliTest, UnusableConfigurationExitsTwoWithAMessage) {
  Write("in.jsonl", Req("a", "Hello"));
  CliResult r = RunStrata("run --model " + Path("nope") + " --input " + Path("in.jsonl") +
                          " --output " + Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("does not exist"), std::string::npos) << r.stderr_text;

  r = RunStrata("run --model " + kModel + " --input " + Path("missing.jsonl") + " --output " +
                Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("missing.jsonl"), std::string::npos) << r.stderr_text;

  r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
                Path("no/such/dir/out.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("no/such/dir"), std::string::npos) << r.stderr_text;

  r = RunStrata("run --input " + Path("in.jsonl") + " --output " + Path("out.jsonl") +
                " --batch-size 0");
  EXPECT_EQ(r.exit_code, 2);

  Write("truncated.gguf", "GGUF\x03");
  r = RunStrata("run --model " + Path("truncated.gguf") + " --input " + Path("in.jsonl") +
                " --output " + Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("truncated.gguf"), std::string::npos) << r.stderr_text;

  r = RunStrata("run --model " + Path("nope") + " --input " + Path("in.jsonl") + " --output " +
                Path("out.jsonl"), "STRATA_CACHE=" + Path("empty-cache"));
  EXPECT_EQ(r.exit_code, 2);
  r = RunStrata("run --input " + Path("in.jsonl") + " --output " + Path("out.jsonl"),
                "STRATA_CACHE=" + Path("empty-cache"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("scripts/setup.sh"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace strata
