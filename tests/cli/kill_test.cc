// Kill anywhere: a job is killed with SIGKILL at many moments and restarted each time, and
// between restarts its output is sometimes cut at a random byte. The final output must hold
// every request exactly once, the same lines as a run that was never interrupted.
//
// How the moments are chosen (no test hooks in the binary): most rounds wait until the output
// grew (a block was committed) and then kill after a random 0-8 ms, so kills land in the prefill,
// decode and writing of the blocks after it and every round makes progress; every fourth round
// kills 0-3 ms after the start instead (model load, input parsing, journal recovery). Cutting
// the output at a random byte is exactly what a crash in the middle of writing a block leaves,
// since the file is always a prefix of what the runs appended; it covers torn writes at every
// offset, which a timed kill would rarely hit. The seed is fixed, so a failure replays.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

using Json = nlohmann::json;

const std::string kModel = kFixtureModel + "llama-gqa";

// 40 greedy requests of varied lengths, OpenAI lines, bad lines and a duplicate id.
std::string Input() {
  std::string out;
  for (int i = 0; i < 40; ++i) {
    const std::string id = std::string("k") + std::to_string(i);
    Json line = {{"custom_id", id},
                 {"prompt", std::string(1 + (i * 11) % 37, 'a' + i % 26) + " then"},
                 {"max_tokens", 3 + (i * 7) % 14},
                 {"temperature", 0}};
    if (i % 9 == 4) {
      line = {{"custom_id", line["custom_id"]}, {"method", "POST"}, {"url", "/v1/completions"},
              {"body", {{"prompt", line["prompt"]}, {"max_tokens", 5}, {"temperature", 0}}}};
    }
    out += line.dump() + "\n";
    if (i == 13) out += "{broken\n";
    if (i == 27) out += R"({"custom_id":"k3","prompt":"again"})" "\n";
  }
  return out;
}

// The decoded text of an output file, plain or zstd.
std::string Decoded(const std::string& path) {
  if (!path.ends_with(".zst")) return ReadFile(path);
  const std::string plain = path + ".decoded";
  EXPECT_EQ(std::system(("zstd -q -d -f " + path + " -o " + plain).c_str()), 0);
  return ReadFile(plain);
}

uintmax_t SizeOf(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// True once `pid` has exited; it stays waitable.
bool Exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
}

class KillTest : public CliTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(KillTest, EveryRequestExactlyOnceWhereverTheJobDies) {
  const std::string out = Path(GetParam());
  const std::string ref = Path(std::string("ref-") + GetParam());
  Write("in.jsonl", Input());
  const std::vector<std::string> args = {"run", "--model", kModel, "--input", Path("in.jsonl"),
                                         "--batch-size", "2", "--sort-window", "8", "--output"};
  const auto with_output = [&](const std::string& path) {
    std::vector<std::string> a = args;
    a.push_back(path);
    return a;
  };
  ASSERT_EQ(WaitStrata(StartStrata(with_output(ref), Path("ref-err.txt"))), 1)
      << ReadFile(Path("ref-err.txt"));

  std::mt19937 rng(20240611);
  int kills = 0, cuts = 0;
  for (int round = 0; round < 80; ++round) {
    const uintmax_t before = SizeOf(out);
    const pid_t pid = StartStrata(with_output(out), Path("err.txt"));
    if (round % 4 == 3) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    } else {
      while (SizeOf(out) <= before && !Exited(pid)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 8000));
    }
    ::kill(pid, SIGKILL);
    const int status = WaitStrata(pid);
    if (status != 128 + SIGKILL) {
      ASSERT_TRUE(status == 0 || status == 1) << status << ": " << ReadFile(Path("err.txt"));
      break;  // it finished before the kill
    }
    ++kills;
    if (rng() % 3 == 0 && SizeOf(out) > 0) {
      std::filesystem::resize_file(out, rng() % SizeOf(out));
      ++cuts;
    }
  }
  const int last = WaitStrata(StartStrata(with_output(out), Path("err.txt")));
  ASSERT_TRUE(last == 0 || last == 1) << last << ": " << ReadFile(Path("err.txt"));
  std::printf("%d kills before the job finished, %d outputs cut at a random byte\n", kills, cuts);
  EXPECT_GE(kills, 8) << "too few kills landed before the job finished";
  EXPECT_GE(cuts, 2);
  const std::string got = Decoded(out);
  EXPECT_EQ(SortedLines(got), SortedLines(Decoded(ref)));
  EXPECT_EQ(SortedLines(got).size(), 42u);
}

INSTANTIATE_TEST_SUITE_P(PlainAndZstd, KillTest, ::testing::Values("out.jsonl", "out.jsonl.zst"),
                         [](const auto& info) {
                           return std::string(info.param).ends_with(".zst") ? "Zstd" : "Plain";
                         });

}  // namespace
}  // namespace strata
