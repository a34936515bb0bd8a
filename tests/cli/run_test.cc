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

// OpenMP's idle threads sleep unless the user says otherwise (main.cc): without OMP_WAIT_POLICY,
// strata starts itself once more with PASSIVE. libgomp shows its settings each time it loads
// (OMP_DISPLAY_ENV): a spin count of 0 is PASSIVE, its default spins 300000 rounds.
TEST_F(CliTest, OpenMpThreadsSleepWhileWaitingUnlessTheUserSaysOtherwise) {
  struct Start {
    int loads = 0;           // how many times libgomp was loaded
    std::string spincount;   // the last load's GOMP_SPINCOUNT
  };
  const auto start = [&](const std::string& env, const std::string& args) {
    const CliResult r = RunStrata(args, "env -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose " + env);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    Start s;
    for (size_t at = 0; (at = r.stderr_text.find("DISPLAY ENVIRONMENT BEGIN", at)) !=
                        std::string::npos; ++at) {
      ++s.loads;
    }
    const std::string key = "GOMP_SPINCOUNT = '";
    if (const size_t at = r.stderr_text.rfind(key); at != std::string::npos) {
      const size_t from = at + key.size();
      s.spincount = r.stderr_text.substr(from, r.stderr_text.find('\'', from) - from);
    }
    return s;
  };
  const Start unset = start("", "--help");
  if (unset.spincount.empty()) GTEST_SKIP() << "the OpenMP runtime is not libgomp";
  EXPECT_EQ(unset.loads, 2);
  EXPECT_EQ(unset.spincount, "0");
  const Start active = start("OMP_WAIT_POLICY=ACTIVE", "--help");
  EXPECT_EQ(active.loads, 1);
  EXPECT_NE(active.spincount, "0");
  const Start passive = start("OMP_WAIT_POLICY=PASSIVE", "--help");
  EXPECT_EQ(passive.loads, 1);
  EXPECT_EQ(passive.spincount, "0");

  Write("in.jsonl", Req("a", "Hello") + Req("b", "Bye"));
  for (const std::string env : {"", "OMP_WAIT_POLICY=ACTIVE"}) {
    std::filesystem::remove(Path("out.jsonl"));
    start(env, "run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
                   Path("out.jsonl"));
    EXPECT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 2u) << env;
  }
}

// Every problem a user can cause with the paths and flags is reported before the model loads
// (the model here would fail to load, so its error would come first otherwise), with exit code 2,
// without a summary or metrics, and with nothing written.
TEST_F(CliTest, PathAndFlagProblemsAreReportedBeforeTheModelLoads) {
  Write("in.jsonl", Req("a", "Hello"));
  Write("truncated.gguf", "GGUF\x03");
  std::filesystem::create_directories(Path("a-dir"));
  struct Case {
    std::string args, message;
  };
  const std::string in = " --input " + Path("in.jsonl");
  const std::string out = " --output " + Path("out.jsonl");
  const std::vector<Case> cases = {
      {in + " --output " + Path("no/such/dir/out.jsonl"), "mkdir -p " + Path("no/such/dir")},
      {in + " --output " + Path("a-dir"), Path("a-dir") + " is a directory"},
      {in + " --output " + Path("in.jsonl"), "is the input file"},
      {" --input " + Path("missing.jsonl") + out, "missing.jsonl"},
      {" --input " + Path("a-dir") + out, Path("a-dir") + " is a directory"},
      {in + out + " --percent 60 60 100 0 100 0", "percent"},
      {in + out + " --policy " + Path("no-plan.yaml"), "no-plan.yaml"},
      {in + out + " --percent 0 0 0 0 0 0 --offload-dir " + Path("no/such/off"),
       "offload directory " + Path("no/such/off") + " does not exist"},
      {in + out + " --percent 0 0 0 0 0 0 --offload-dir " + Path("in.jsonl"),
       "offload directory " + Path("in.jsonl") + " is not a directory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CliResult r = RunStrata("run --model " + Path("truncated.gguf") + c.args +
                                  " --metrics " + Path("m.json"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.stderr_text.find(c.message), std::string::npos) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("truncated.gguf"), std::string::npos) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("finished:"), std::string::npos) << r.stderr_text;
    EXPECT_FALSE(std::filesystem::exists(Path("out.jsonl")));
    EXPECT_FALSE(std::filesystem::exists(Path("m.json")));
  }
  EXPECT_EQ(ReadFile(Path("in.jsonl")), Req("a", "Hello"));
}

}  // namespace
}  // namespace strata
