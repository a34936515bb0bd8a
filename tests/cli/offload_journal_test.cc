// An I/O fault in the middle of an offloaded job, through the job loop of `strata run`
// (src/cli/job_loop.h) with a real OffloadGenerator whose FileEnv injects faults: the job ends
// with the fault's error, the output journal holds exactly the blocks finished before it (every
// line whole and parsing), and a rerun without faults completes it byte for byte as a job that
// never failed. The binary has no fault hook, so this runs the loop in-process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/job_loop.h"
#include "src/io/fault_env.h"
#include "src/model/model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"

namespace strata {
namespace {

using Json = nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class OffloadJournalTest : public ::testing::TestWithParam<IoFault> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/offload_journal_" + std::to_string(::getpid()) + "_" +
           std::to_string(static_cast<int>(GetParam()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto m = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/llama-gqa");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto t = LoadTokenizerForModel(*model_);
    ASSERT_TRUE(t.ok());
    tokenizer_ = std::move(*t);
    std::ofstream in(dir_ + "/in.jsonl");
    for (int i = 0; i < 12; ++i) {
      in << Json{{"custom_id", "j" + std::to_string(i)},
                 {"prompt", std::string(1 + (i * 5) % 13, 'a' + i % 26) + " or"},
                 {"max_tokens", 2 + i % 5},
                 {"temperature", 0}}
                .dump()
         << "\n";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs the job into `output`; from block `fault_block` on (counting from 0; -1: never) the
  // disk tier fails with `fault` on every matching transfer.
  JobLoopOutcome RunJob(const std::string& output, int fault_block, IoFault fault) {
    auto backend = MakeCpuBackend();
    auto cpu_backend = MakeCpuBackend();
    FaultInjectingEnv* faults = nullptr;
    OffloadOptions o;
    o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
    o.tiers.offload_dir = dir_;
    o.tiers.wrap_file_env = [&](std::unique_ptr<FileEnv> env) -> std::unique_ptr<FileEnv> {
      auto wrapped = std::make_unique<FaultInjectingEnv>(std::move(env));
      faults = wrapped.get();
      return wrapped;
    };
    OffloadGenerator offload(*model_, *backend, *cpu_backend, *tokenizer_, {}, o);
    Result<OutputJournal> journal = RecoverOutputJournal(output);
    EXPECT_TRUE(journal.ok());
    BlockReaderOptions ro;
    ro.block_size = 4;
    ro.context_length = model_->config().max_position_embeddings;
    ro.add_bos = tokenizer_->add_bos_by_default();
    Result<std::unique_ptr<BlockReader>> reader =
        BlockReader::Open(dir_ + "/in.jsonl", *tokenizer_, ro, std::move(*journal));
    EXPECT_TRUE(reader.ok());
    Result<std::unique_ptr<OutputWriter>> writer = OutputWriter::Open(output);
    EXPECT_TRUE(writer.ok());
    const std::atomic<bool> stop{false};
    ProgressReporter progress(ProgressStyle::kOff, 1.0);
    int block = 0;
    JobLoop loop;
    loop.reader = reader->get();
    loop.writer = writer->get();
    loop.stop = &stop;
    loop.progress = &progress;
    loop.model_name = "llama-gqa";
    loop.generate = [&](const std::vector<GenerationRequest>& b) {
      if (block++ == fault_block) {
        // Sized for this block first (a longer prompt re-places, with a fresh FileEnv); then
        // reads of the scratch file fail, or writes to it, from here on.
        int prompt_len = 0, max_new = 0;
        for (const GenerationRequest& r : b) {
          prompt_len = std::max(prompt_len, static_cast<int>(r.prompt.size()));
          max_new = std::max(max_new, r.max_new_tokens);
        }
        EXPECT_TRUE(offload.ScheduleFor(static_cast<int>(b.size()), prompt_len, max_new).ok());
        faults->AddRule({fault, ".strata-scratch", 0, UINT64_MAX, -1});
      }
      return offload.TryGenerate(b);
    };
    JobMetrics metrics;
    return RunJobLoop(loop, &metrics);
  }

  std::string dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(OffloadJournalTest, FaultMidJobKeepsTheJournalAndTheRerunCompletesIt) {
  const std::string ref = dir_ + "/ref.jsonl", out = dir_ + "/out.jsonl";
  ASSERT_TRUE(RunJob(ref, -1, GetParam()).status.ok());
  const JobLoopOutcome failed = RunJob(out, 2, GetParam());
  ASSERT_FALSE(failed.status.ok());
  EXPECT_NE(failed.status.message().find(".strata-scratch"), std::string::npos)
      << failed.status.ToString();
  // The two blocks before the fault, whole: a prefix of the reference, line by line.
  const std::string journal = ReadAll(out);
  std::ifstream lines(out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_TRUE(Json::accept(line)) << line;
  }
  EXPECT_EQ(n, 8);
  EXPECT_EQ(ReadAll(ref).substr(0, journal.size()), journal);
  ASSERT_TRUE(RunJob(out, -1, GetParam()).status.ok());
  EXPECT_EQ(ReadAll(out), ReadAll(ref));
}

const char* FaultName(IoFault f) {
  switch (f) {
    case IoFault::kShortRead: return "ShortRead";
    case IoFault::kReadError: return "ReadError";
    case IoFault::kWriteError: return "WriteError";
    case IoFault::kNoSpace: return "NoSpace";
  }
  return "?";
}

INSTANTIATE_TEST_SUITE_P(Faults, OffloadJournalTest,
                         ::testing::Values(IoFault::kReadError, IoFault::kWriteError,
                                           IoFault::kNoSpace, IoFault::kShortRead),
                         [](const ::testing::TestParamInfo<IoFault>& info) {
                           return std::string(FaultName(info.param));
                         });

}  // namespace
}  // namespace strata
