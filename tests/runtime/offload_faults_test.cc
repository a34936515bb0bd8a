// I/O faults, cancellation and the order of lanes in the offloading engine. A FaultInjectingEnv
// wraps the run's FileEnv (MemoryTiersOptions::wrap_file_env); its rules are added once the
// tiers exist, so each fault lands while the executor runs a block with weights, KV cache and
// hidden states on disk. Every fault ends the block with a Status naming the operation and the
// file, never a hang (a watchdog aborts the binary) or a crash.
//
// Short reads: the FileEnvs already continue a transfer that moved only part of its bytes (see
// src/io/transfer.h, AdvanceChunk); a read that still ends early has met the end of the file,
// which no retry can fix, so it is reported (IoError "short read ... of <file>").
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <thread>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/io/fault_env.h"
#include "src/model/model.h"
#include "src/model/store_writer.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"
#include "tests/reference/generator.h"

namespace strata {
namespace {

// Aborts the binary when its scope still runs after `seconds`: a hang fails loudly.
class Watchdog {
 public:
  explicit Watchdog(int seconds)
      : thread_([this, seconds] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: still running after %d s, a hang\n", seconds);
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Threads of this process, from /proc; the kernel's io_uring workers (iou-wrk-*, iou-sqp-*),
// which come and go on their own, are not counted.
int ThreadCount() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(e.path() / "comm"), comm);
    n += comm.rfind("iou-", 0) != 0;
  }
  return n;
}

// ThreadCount() once it equals `expected`, or after a second. A joined thread can stay listed in
// /proc for a moment while the kernel reaps it; a lane that outlived its block stays for good.
int ThreadCountSettledAt(int expected) {
  int n = ThreadCount();
  for (int i = 0; i < 200 && n != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = ThreadCount();
  }
  return n;
}

struct Fixture {
  std::shared_ptr<const std::string> store_dir;  // removed with the last copy, after the models
  std::unique_ptr<Model> source, stored;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<GenerationRequest> block;

  // Sets `offload` up for this block (tiers, weights home) as TryGenerate would.
  void Prepare(OffloadGenerator& offload) const {
    int prompt_len = 0;
    for (const GenerationRequest& r : block) {
      prompt_len = std::max(prompt_len, static_cast<int>(r.prompt.size()));
    }
    Result<BlockSchedule> s = offload.ScheduleFor(static_cast<int>(block.size()), prompt_len,
                                                  block.front().max_new_tokens);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }
};

// The llama-gqa fixture, from its Hugging Face directory and converted to a strata store.
Fixture Load(int max_new) {
  Fixture f;
  const std::string dir = std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/llama-gqa";
  auto m = LoadModel(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return f;
  f.source = std::move(*m);
  const std::string store = ::testing::TempDir() + "/faults_store_" + std::to_string(::getpid());
  std::filesystem::remove_all(store);
  f.store_dir =
      std::shared_ptr<const std::string>(new std::string(store), [](const std::string* d) {
        std::filesystem::remove_all(*d);
        delete d;
      });
  EXPECT_TRUE(WriteStore(*f.source, store).ok());
  auto s = LoadModel(store);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return f;
  f.stored = std::move(*s);
  auto t = LoadTokenizerForModel(*f.source);
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return f;
  f.tokenizer = std::move(*t);
  std::ifstream in(dir + "/expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  for (const auto& ids : expected["input_ids"]) {
    GenerationRequest r;
    r.prompt = ids.get<std::vector<int32_t>>();
    r.max_new_tokens = max_new;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    f.block.push_back(r);
  }
  return f;
}

struct FaultCase {
  const char* name;
  IoFault fault;
  const char* file;  // rule's path_contains: the scratch file or the store's tensors.bin
  bool from_store;   // run the store-loaded model (disk weights read in place)
  StatusCode code;
  const char* message;  // in the error
};

// Test names and ctest's list show the case's name.
void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

class OffloadFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(OffloadFaultTest, FaultEndsTheBlockWithAClearError) {
  const FaultCase& c = GetParam();
  Fixture f = Load(4);
  ASSERT_FALSE(f.block.empty());
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  FaultInjectingEnv* faults = nullptr;
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
  o.tiers.offload_dir = ::testing::TempDir();
  o.tiers.wrap_file_env = [&](std::unique_ptr<FileEnv> env) -> std::unique_ptr<FileEnv> {
    auto wrapped = std::make_unique<FaultInjectingEnv>(std::move(env));
    faults = wrapped.get();
    return wrapped;
  };
  o.executor.jitter_us = 100;
  const Model& model = c.from_store ? *f.stored : *f.source;
  OffloadGenerator offload(model, *backend, *cpu_backend, *f.tokenizer, {}, o);
  // Sets the tiers up (and writes the weights home) before any fault is armed.
  f.Prepare(offload);
  ASSERT_NE(faults, nullptr);
  faults->AddRule({c.fault, c.file, 0, UINT64_MAX, -1});
  const int threads = ThreadCount();
  Result<std::vector<GenerationResult>> got = [&] {
    Watchdog watchdog(120);
    return offload.TryGenerate(f.block);
  }();
  ASSERT_FALSE(got.ok());
  EXPECT_GT(faults->fired(), 0);
  EXPECT_EQ(got.status().code(), c.code) << got.status().ToString();
  EXPECT_NE(got.status().message().find(c.message), std::string::npos) << got.status().ToString();
  EXPECT_NE(got.status().message().find(c.file), std::string::npos) << got.status().ToString();
  EXPECT_EQ(ThreadCountSettledAt(threads), threads)
      << "the executor's lanes outlived the failed block";
}

// The executor's order between lanes comes from its events alone: when every compute step skips
// its waits (ExecutorOptions::skip_waits), one of them starts before a load it needs has finished
// and the step's buffer checks stop the process (executor.h). With the waits, the same blocks run
// in every other test here and in policy_matrix_test.
TEST(ExecutorEventsDeathTest, ADroppedWaitIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Fixture f = Load(2);
        auto backend = MakeCpuBackend();
        auto cpu_backend = MakeCpuBackend();
        OffloadOptions o;
        o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
        o.tiers.offload_dir = ::testing::TempDir();
        o.executor.jitter_us = 2000;
        o.executor.skip_waits = [](const Step& s) { return s.kind == StepKind::kCompute; };
        for (int attempt = 0; attempt < 20; ++attempt) {
          OffloadGenerator offload(*f.source, *backend, *cpu_backend, *f.tokenizer, {}, o);
          (void)offload.TryGenerate(f.block);
        }
      },
      "a step ran before its input|a buffer in use");
}

INSTANTIATE_TEST_SUITE_P(
    Faults, OffloadFaultTest,
    ::testing::Values(
        FaultCase{"ShortReadScratch", IoFault::kShortRead, ".strata-scratch", false,
                  StatusCode::kIoError, "short read: read of"},
        FaultCase{"ReadErrorScratch", IoFault::kReadError, ".strata-scratch", false,
                  StatusCode::kIoError, "read of"},
        FaultCase{"WriteErrorScratch", IoFault::kWriteError, ".strata-scratch", true,
                  StatusCode::kIoError, "write of"},
        FaultCase{"NoSpaceScratch", IoFault::kNoSpace, ".strata-scratch", true,
                  StatusCode::kResourceExhausted, "No space left on device"},
        FaultCase{"ShortReadStore", IoFault::kShortRead, "tensors.bin", true,
                  StatusCode::kIoError, "short read: read of"},
        FaultCase{"ReadErrorStore", IoFault::kReadError, "tensors.bin", true,
                  StatusCode::kIoError, "read of"}),
    [](const ::testing::TestParamInfo<FaultCase>& info) { return info.param.name; });

// ENOSPC when the scratch file is preallocated: the setup fails naming the offload directory
// and saying what to do, before anything runs.
TEST(OffloadFaultSetupTest, NoSpaceForTheScratchFile) {
  Fixture f = Load(2);
  ASSERT_FALSE(f.block.empty());
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
  o.tiers.offload_dir = ::testing::TempDir();
  o.tiers.wrap_file_env = [](std::unique_ptr<FileEnv> env) -> std::unique_ptr<FileEnv> {
    auto wrapped = std::make_unique<FaultInjectingEnv>(std::move(env));
    wrapped->AddRule({IoFault::kNoSpace, ".strata-scratch", 0, UINT64_MAX, -1});
    return wrapped;
  };
  OffloadGenerator offload(*f.source, *backend, *cpu_backend, *f.tokenizer, {}, o);
  Watchdog watchdog(120);
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(f.block);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted) << got.status().ToString();
  EXPECT_NE(got.status().message().find("has no room"), std::string::npos);
  EXPECT_NE(got.status().message().find("--offload-dir"), std::string::npos);
}

// A cancel raised from another thread mid-block stops the executor within a token step: every
// result comes back kCancelled, short of its max_new_tokens, promptly, and no lane thread is
// left behind. The lanes are jittered so that the block would take many seconds uncancelled.
TEST(OffloadCancelTest, CancelFromAnotherThreadStopsTheBlockPromptly) {
  Fixture f = Load(48);
  ASSERT_FALSE(f.block.empty());
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
  o.tiers.offload_dir = ::testing::TempDir();
  o.executor.jitter_us = 4000;
  std::atomic<bool> cancel{false};
  for (int from_store = 0; from_store < 2; ++from_store) {
    SCOPED_TRACE(from_store ? "store model" : "source model");
    cancel = false;
    OffloadGenerator offload(from_store ? *f.stored : *f.source, *backend, *cpu_backend, *f.tokenizer, {}, o);
    offload.set_cancel(&cancel);
    f.Prepare(offload);
    const int threads = ThreadCount();
    using Clock = std::chrono::steady_clock;
    Clock::time_point raised;
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      raised = Clock::now();
      cancel = true;
    });
    Result<std::vector<GenerationResult>> got = [&] {
      Watchdog watchdog(120);
      return offload.TryGenerate(f.block);
    }();
    const double after_s = std::chrono::duration<double>(Clock::now() - raised).count();
    canceller.join();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), f.block.size());
    for (const GenerationResult& r : *got) {
      EXPECT_EQ(r.reason, StopReason::kCancelled);
      EXPECT_LT(r.tokens.size(), 48u);
    }
    // One token step of this model with 4 ms jitter per step is well under a second.
    EXPECT_LT(after_s, 5.0) << "the block went on after the cancel";
    EXPECT_EQ(ThreadCountSettledAt(threads), threads);
  }
}

// A cancel already raised: nothing runs; a cleared flag: the generator runs again, complete, with
// the frozen reference engine's tokens (tests/reference/generator.h).
TEST(OffloadCancelTest, RaisedBeforehandRunsNothingAndClearedRunsAgain) {
  Fixture f = Load(3);
  ASSERT_FALSE(f.block.empty());
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 1, 2);  // blocks of two: several
  o.tiers.offload_dir = ::testing::TempDir();
  std::atomic<bool> cancel{true};
  OffloadGenerator offload(*f.source, *backend, *cpu_backend, *f.tokenizer, {}, o);
  offload.set_cancel(&cancel);
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(f.block);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), f.block.size());
  for (const GenerationResult& r : *got) {
    EXPECT_EQ(r.reason, StopReason::kCancelled);
    EXPECT_TRUE(r.tokens.empty());
  }
  cancel = false;
  got = offload.TryGenerate(f.block);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  reference::Transformer transformer(*f.source);
  const std::vector<GenerationResult> want =
      reference::Generator(transformer, *f.tokenizer, {}).Generate(f.block);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*got)[i].reason, StopReason::kLength);
    EXPECT_EQ((*got)[i].tokens, want[i].tokens);
  }
}

}  // namespace
}  // namespace strata
