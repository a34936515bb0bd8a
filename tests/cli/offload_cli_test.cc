// The offloading engine through the binary: an unusable offload directory (missing with its
// parent, not a directory, read-only) ends the run before the model loads with a clear message
// and exit code 2, leaving the output journal that earlier blocks wrote intact, and a rerun with a
// new directory (created) completes it byte for byte as a run that never failed; SIGTERM stops an
// offloaded run at a token step.
//
// Faults in the middle of a run (EIO, ENOSPC, short reads) are injected below the binary, in
// tests/runtime/offload_faults_test.cc and tests/cli/offload_journal_test.cc: the binary has no
// fault hook.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

using Json = nlohmann::json;

const std::string kModel = kFixtureModel + "llama-gqa";
// Weights, KV cache and hidden states all on disk, two micro-batches of two.
const std::string kAllDisk =
    "--percent 0 0 0 0 0 0 --gpu-batch-size 2 --num-gpu-batches 2 --batch-size 4 "
    "--sort-window 0";

std::string Requests(int first, int count, int max_tokens) {
  std::string out;
  for (int i = first; i < first + count; ++i) {
    out += Json{{"custom_id", "o" + std::to_string(i)},
                {"prompt", std::string(1 + (i * 7) % 19, 'a' + i % 26) + " and"},
                {"max_tokens", 2 + (i * 3) % max_tokens},
                {"temperature", 0}}
               .dump() +
           "\n";
  }
  return out;
}

std::string OffloadRun(const std::string& in, const std::string& out,
                       const std::string& offload_dir) {
  return "run --model " + kModel + " --input " + in + " --output " + out + " " + kAllDisk +
         " --offload-dir " + offload_dir;
}

class OffloadCliTest : public CliTest {};

TEST_F(OffloadCliTest, BadOffloadDirectoryKeepsTheJournalAndTheRerunCompletesIt) {
  Write("all.jsonl", Requests(0, 12, 6));
  Write("first.jsonl", Requests(0, 8, 6));
  std::filesystem::create_directories(Path("good"));
  // The reference: the whole input, never failing.
  const CliResult ref = RunStrata(OffloadRun(Path("all.jsonl"), Path("ref.jsonl"), Path("good")));
  ASSERT_EQ(ref.exit_code, 0) << ref.stderr_text;
  EXPECT_EQ(ReadJsonLines(Path("ref.jsonl")).size(), 12u);
  // Two blocks of the job done, then runs whose offload directory is unusable.
  const CliResult first =
      RunStrata(OffloadRun(Path("first.jsonl"), Path("out.jsonl"), Path("good")));
  ASSERT_EQ(first.exit_code, 0) << first.stderr_text;
  const std::string journal = ReadFile(Path("out.jsonl"));
  ASSERT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 8u);

  struct Bad {
    std::string dir, message;
  };
  Write("a-file", "not a directory\n");
  std::vector<Bad> bad = {{Path("no/such"), "does not exist"},
                          {Path("a-file"), "is not a directory"}};
  if (::geteuid() != 0) {  // root writes into a read-only directory anyway
    std::filesystem::create_directories(Path("read-only"));
    ::chmod(Path("read-only").c_str(), 0555);
    bad.push_back({Path("read-only"), "is not writable"});
  }
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.dir);
    const CliResult r = RunStrata(OffloadRun(Path("all.jsonl"), Path("out.jsonl"), b.dir));
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("offload directory " + b.dir), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(b.message), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--offload-dir"), std::string::npos) << r.stderr_text;
    // Found before the model loads: no model line, no summary.
    EXPECT_EQ(r.stderr_text.find("strata info: model"), std::string::npos) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("finished:"), std::string::npos) << r.stderr_text;
    EXPECT_EQ(ReadFile(Path("out.jsonl")), journal) << "the journal changed";
    EXPECT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 8u);  // each line parses
  }
  // A missing directory whose parent exists is created.
  const CliResult rerun =
      RunStrata(OffloadRun(Path("all.jsonl"), Path("out.jsonl"), Path("new")));
  ASSERT_EQ(rerun.exit_code, 0) << rerun.stderr_text;
  EXPECT_NE(rerun.stderr_text.find("created offload directory " + Path("new")), std::string::npos)
      << rerun.stderr_text;
  EXPECT_TRUE(std::filesystem::is_directory(Path("new")));
  EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("ref.jsonl")));
}

// SIGTERM reaches the offloading executor (OffloadGenerator::set_cancel): the run stops at a
// token step with exit code 75 and whole lines only; the rerun finishes with the same lines as a
// run never stopped.
TEST_F(OffloadCliTest, SigtermStopsAnOffloadedRunAndTheRerunResumes) {
  Write("in.jsonl", Requests(0, 40, 24));
  std::filesystem::create_directories(Path("good"));
  const CliResult ref = RunStrata(OffloadRun(Path("in.jsonl"), Path("ref.jsonl"), Path("good")));
  ASSERT_EQ(ref.exit_code, 0) << ref.stderr_text;
  const pid_t pid = StartStrata({"run", "--model", kModel, "--input", Path("in.jsonl"), "--output",
                                 Path("out.jsonl"), "--percent", "0", "100", "0", "100", "0",
                                 "100", "--gpu-batch-size", "2", "--num-gpu-batches", "2",
                                 "--batch-size", "4", "--sort-window", "0", "--offload-dir",
                                 Path("good")},
                                Path("err.txt"));
  ASSERT_TRUE(WaitForOutput(Path("out.jsonl"), pid)) << ReadFile(Path("err.txt"));
  ::kill(pid, SIGTERM);
  ASSERT_EQ(WaitStrata(pid), 75) << ReadFile(Path("err.txt"));
  EXPECT_NE(ReadFile(Path("err.txt")).find("rerun the same command to resume"), std::string::npos);
  const std::string partial = ReadFile(Path("out.jsonl"));
  ASSERT_FALSE(partial.empty());
  EXPECT_EQ(partial.back(), '\n');
  EXPECT_LT(ReadJsonLines(Path("out.jsonl")).size(), 40u);  // each line parses
  const CliResult rerun =
      RunStrata(OffloadRun(Path("in.jsonl"), Path("out.jsonl"), Path("good")));
  ASSERT_EQ(rerun.exit_code, 0) << rerun.stderr_text;
  EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("ref.jsonl")));
}

// A 4-bit store (`strata convert --compress-weight`) runs with its weights as stored, without
// --compress-weight: the run says so, and its lines are those of the source model quantized in
// memory by --compress-weight. Converting the store again is refused with what to do instead.
TEST_F(OffloadCliTest, FourBitStoreRunsWithItsWeightsAsStored) {
  CliResult r = RunStrata("convert --model " + kModel + " --out " + Path("q4") + " --compress-weight");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  r = RunStrata("convert --model " + Path("q4") + " --out " + Path("again"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("is a 4-bit strata store already; convert the model it was "
                               "converted from instead"),
            std::string::npos)
      << r.stderr_text;

  Write("in.jsonl", Requests(0, 6, 6));
  std::filesystem::create_directories(Path("off"));
  r = RunStrata(OffloadRun(Path("in.jsonl"), Path("ref.jsonl"), Path("off")) +
                " --compress-weight");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string stored_run = "run --model " + Path("q4") + " --input " + Path("in.jsonl") +
                                 " --output " + Path("out.jsonl") + " " + kAllDisk +
                                 " --offload-dir " + Path("off");
  r = RunStrata(stored_run);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("with 4-bit weights as the model stores them"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 6u);
  EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("ref.jsonl")));
}

}  // namespace
}  // namespace strata
