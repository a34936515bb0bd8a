// The fault-injecting FileEnv: every injected failure reaches the waiter as a clear Status, the
// requests around it still complete, and nothing hangs.
#include "src/io/fault_env.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/io/memory_env.h"
#include "src/io/uring_env.h"
#include "tests/io/io_test_util.h"

namespace strata {
namespace {

using io_testing::FillPattern;
using io_testing::FirstMismatch;

constexpr size_t kBytes = 64 << 10;

class FaultEnvTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::unique_ptr<FileEnv> base;
    if (GetParam() == "memory") {
      base = NewMemoryEnv();
    } else {
      Result<std::unique_ptr<FileEnv>> uring = NewUringEnv({});
      ASSERT_TRUE(uring.ok()) << uring.status().ToString();
      base = std::move(*uring);
    }
    env_ = std::make_unique<FaultInjectingEnv>(std::move(base));
    Result<AlignedBuffer> out = AlignedBuffer::Allocate(kBytes),
                          in = AlignedBuffer::Allocate(kBytes);
    ASSERT_TRUE(out.ok() && in.ok());
    out_ = std::move(*out);
    in_ = std::move(*in);
    FillPattern(out_.data(), kBytes, 7);
    auto f = env_->Open(io_testing::FreshDir().string() + "/data", {FileMode::kCreate});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    file_ = std::move(*f);
    ASSERT_TRUE(Transfer(IoOp::kWrite, 0, kBytes).ok());
  }
  void TearDown() override { file_.reset(); }

  Status Transfer(IoOp op, uint64_t offset, size_t n) {
    IoEvent e;
    uint8_t* buf = (op == IoOp::kRead ? in_.data() : out_.data()) + offset;
    IoRequest r{op, file_.get(), offset, n, buf};
    env_->Submit({&r, 1}, &e);
    return e.Wait();
  }

  std::unique_ptr<FaultInjectingEnv> env_;
  AlignedBuffer out_, in_;
  std::unique_ptr<DiskFile> file_;
};

TEST_P(FaultEnvTest, ShortReadIsReportedThenRetryable) {
  env_->AddRule({IoFault::kShortRead, "", 0, UINT64_MAX, 1});
  const Status s = Transfer(IoOp::kRead, 0, kBytes);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("short read"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ended after 32768 bytes"), std::string::npos) << s.message();
  EXPECT_EQ(FirstMismatch(in_.data(), kBytes / 2, 7), kBytes / 2);  // the half that arrived
  // The rule fired once; the retry reads everything.
  ASSERT_TRUE(Transfer(IoOp::kRead, 0, kBytes).ok());
  EXPECT_EQ(FirstMismatch(in_.data(), kBytes, 7), kBytes);
  EXPECT_EQ(env_->fired(), 1);
}

TEST_P(FaultEnvTest, ReadErrorHitsOnlyTheRequestsInItsRange) {
  env_->AddRule({IoFault::kReadError, "", 16 << 10, 32 << 10, -1});
  IoEvent first, second;
  std::vector<IoRequest> a, b;
  for (size_t at = 0; at < kBytes; at += 16 << 10) {
    (at < 32 << 10 ? a : b).push_back({IoOp::kRead, file_.get(), at, 16 << 10, in_.data() + at});
  }
  env_->Submit(a, &first);
  env_->Submit(b, &second);
  const Status s = first.Wait();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("read of 16384 bytes at offset 16384"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.message();
  ASSERT_TRUE(second.Wait().ok());
  EXPECT_EQ(FirstMismatch(in_.data() + (32 << 10), 32 << 10, 7, 32 << 10), size_t{32} << 10);
  EXPECT_TRUE(first.Wait().ok()) << "Wait() clears the error for the buffer's next use";
}

TEST_P(FaultEnvTest, WriteErrorsAndFullDisks) {
  env_->AddRule({IoFault::kWriteError, "", 0, 4096, 1});
  env_->AddRule({IoFault::kNoSpace, "", 0, UINT64_MAX, 1});
  Status s = Transfer(IoOp::kWrite, 0, 4096);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  s = Transfer(IoOp::kWrite, 0, 4096);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--offload-dir"), std::string::npos) << s.message();
  EXPECT_TRUE(Transfer(IoOp::kWrite, 0, 4096).ok());
  EXPECT_EQ(env_->fired(), 2);
}

TEST_P(FaultEnvTest, RulesMatchByPathAndIgnoreOtherOperations) {
  env_->AddRule({IoFault::kReadError, "some-other-file", 0, UINT64_MAX, -1});
  env_->AddRule({IoFault::kWriteError, "", 0, UINT64_MAX, -1});
  EXPECT_TRUE(Transfer(IoOp::kRead, 0, kBytes).ok());
  EXPECT_EQ(env_->fired(), 0);
}

TEST_P(FaultEnvTest, EveryRequestFailingStillCompletes) {
  env_->AddRule({IoFault::kReadError, "", 0, UINT64_MAX, -1});
  IoEvent e;
  std::vector<IoRequest> batch(200, IoRequest{IoOp::kRead, file_.get(), 0, 4096, in_.data()});
  env_->Submit(batch, &e);
  EXPECT_EQ(e.Wait().code(), StatusCode::kIoError);
  EXPECT_EQ(env_->fired(), 200);
}

INSTANTIATE_TEST_SUITE_P(Bases, FaultEnvTest, ::testing::Values("io_uring", "memory"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace strata
