// Every FileEnv implementation moves the same bytes: round trips, many requests per event,
// registered buffers, alignment errors and reads past the end, for io_uring, pread and memory;
// and, for io_uring, writes that do not queue behind reads.
#include "src/io/file_env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "src/io/memory_env.h"
#include "src/io/pread_env.h"
#include "src/io/uring_env.h"
#include "tests/io/io_test_util.h"

namespace strata {
namespace {

using io_testing::FillPattern;
using io_testing::FirstMismatch;
using io_testing::FreshDir;

std::unique_ptr<FileEnv> MakeEnv(const std::string& kind, FileEnvOptions options = {}) {
  if (kind == "memory") return NewMemoryEnv();
  if (kind == "pread") return NewPreadEnv(options);
  Result<std::unique_ptr<FileEnv>> env = NewUringEnv(options);
  EXPECT_TRUE(env.ok()) << env.status().ToString();
  return env.ok() ? std::move(*env) : nullptr;
}

AlignedBuffer Buffer(size_t bytes) {
  Result<AlignedBuffer> b = AlignedBuffer::Allocate(bytes);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(*b);
}

class FileEnvTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = FreshDir().string();
    env_ = MakeEnv(GetParam(), Options());
    ASSERT_NE(env_, nullptr);
  }
  virtual FileEnvOptions Options() const {
    FileEnvOptions o;
    o.queue_depth = 4;  // small, so that submitters block for room
    o.read_queue_depth = 4;
    o.max_request_bytes = 256 << 10;
    return o;
  }
  std::unique_ptr<DiskFile> Create(const std::string& name) {
    Result<std::unique_ptr<DiskFile>> f = env_->Open(dir_ + "/" + name, {FileMode::kCreate});
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }
  Status Write(DiskFile* f, uint64_t offset, size_t n, const uint8_t* src) {
    IoEvent done;
    IoRequest r{IoOp::kWrite, f, offset, n, const_cast<uint8_t*>(src)};
    env_->Submit({&r, 1}, &done);
    return done.Wait();
  }
  Status Read(DiskFile* f, uint64_t offset, size_t n, uint8_t* dst) {
    IoEvent done;
    IoRequest r{IoOp::kRead, f, offset, n, dst};
    env_->Submit({&r, 1}, &done);
    return done.Wait();
  }

  std::string dir_;
  std::unique_ptr<FileEnv> env_;
};

TEST_P(FileEnvTest, WritesThenReadsBackTheSameBytes) {
  const size_t n = (5 << 20) + 4096;  // many transfers, the last one short
  AlignedBuffer out = Buffer(n), in = Buffer(n);
  FillPattern(out.data(), n, 1);
  auto f = Create("data");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(Write(f.get(), 0, n, out.data()).ok());
  ASSERT_TRUE(env_->Sync(f.get()).ok());
  Result<uint64_t> size = env_->Size(f.get());
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, n);
  ASSERT_TRUE(Read(f.get(), 0, n, in.data()).ok());
  EXPECT_EQ(FirstMismatch(in.data(), n, 1), n);
}

TEST_P(FileEnvTest, ManyRequestsCompleteAgainstTheirOwnEvents) {
  constexpr int kBuffers = 8, kPerBuffer = 8;
  constexpr size_t kPiece = 128 << 10, kPerEvent = kPerBuffer * kPiece;
  const size_t n = kBuffers * kPerEvent;
  AlignedBuffer out = Buffer(n), in = Buffer(n);
  FillPattern(out.data(), n, 2);
  auto f = Create("data");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(Write(f.get(), 0, n, out.data()).ok());

  std::vector<IoEvent> events(kBuffers);
  for (int b = 0; b < kBuffers; ++b) {
    std::vector<IoRequest> batch;
    for (int i = 0; i < kPerBuffer; ++i) {
      const size_t at = b * kPerEvent + i * kPiece;
      batch.push_back({IoOp::kRead, f.get(), at, kPiece, in.data() + at});
    }
    env_->Submit(batch, &events[b]);
  }
  // Wait per buffer, last first: each event covers exactly its own requests.
  for (int b = kBuffers - 1; b >= 0; --b) {
    ASSERT_TRUE(events[b].Wait().ok());
    EXPECT_TRUE(events[b].Done());
    EXPECT_EQ(FirstMismatch(in.data() + b * kPerEvent, kPerEvent, 2, b * kPerEvent), kPerEvent);
  }
}

TEST_P(FileEnvTest, ReadPastTheEndIsAShortReadError) {
  const size_t n = 8192;
  AlignedBuffer out = Buffer(n), in = Buffer(2 * n);
  FillPattern(out.data(), n, 3);
  auto f = Create("data");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(Write(f.get(), 0, n, out.data()).ok());
  const Status s = Read(f.get(), 0, 2 * n, in.data());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("short read"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("data"), std::string::npos) << s.message();
}

TEST_P(FileEnvTest, ZeroLengthAndEmptyBatchesCompleteAtOnce) {
  auto f = Create("data");
  ASSERT_NE(f, nullptr);
  IoEvent e;
  env_->Submit({}, &e);
  EXPECT_TRUE(e.Done());
  IoRequest r{IoOp::kRead, f.get(), 0, 0, nullptr};
  env_->Submit({&r, 1}, &e);
  EXPECT_TRUE(e.Wait().ok());
}

TEST_P(FileEnvTest, MissingFilesAndTakenNames) {
  Result<std::unique_ptr<DiskFile>> missing = env_->Open(dir_ + "/none", {FileMode::kRead});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto f = Create("data");
  ASSERT_NE(f, nullptr);
  Result<std::unique_ptr<DiskFile>> again = env_->Open(dir_ + "/data", {FileMode::kCreate});
  EXPECT_FALSE(again.ok());
  EXPECT_TRUE(env_->Remove(dir_ + "/data").ok());
  EXPECT_EQ(env_->Remove(dir_ + "/data").code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(AllEnvs, FileEnvTest, ::testing::Values("io_uring", "pread", "memory"),
                         [](const auto& info) { return info.param; });

// The OS-backed environments: direct I/O rules and registered buffers.
class PosixEnvTest : public FileEnvTest {};

TEST_P(PosixEnvTest, MisalignedDirectRequestsAreRefusedWithAReason) {
  auto f = Create("data");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->direct()) << "expected O_DIRECT on " << dir_;
  AlignedBuffer buf = Buffer(8192);
  for (auto [offset, length, shift] : {std::tuple{100, 4096, 0}, {0, 1000, 0}, {0, 4096, 8}}) {
    const Status s = Write(f.get(), offset, length, buf.data() + shift);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("AlignedBuffer"), std::string::npos) << s.message();
  }
}

TEST_P(PosixEnvTest, BufferedFileWithAnUnalignedEndReportsAShortRead) {
  Result<std::unique_ptr<DiskFile>> f =
      env_->Open(dir_ + "/odd", {FileMode::kCreate, /*direct=*/false});
  ASSERT_TRUE(f.ok());
  std::vector<uint8_t> out(5000), in(8192);
  FillPattern(out.data(), out.size(), 4);
  ASSERT_TRUE(Write(f->get(), 0, out.size(), out.data()).ok());
  const Status s = Read(f->get(), 0, in.size(), in.data());
  EXPECT_NE(s.message().find("ended after 5000 bytes"), std::string::npos) << s.ToString();
  ASSERT_TRUE(Read(f->get(), 0, out.size(), in.data()).ok());
  EXPECT_EQ(FirstMismatch(in.data(), out.size(), 4), out.size());
}

INSTANTIATE_TEST_SUITE_P(OsEnvs, PosixEnvTest, ::testing::Values("io_uring", "pread"),
                         [](const auto& info) { return info.param; });

// The io_uring env's reads and writes have rings of their own: with the read ring's only entry
// (both depths 1) held by a read that cannot finish (a FIFO nobody writes to yet), a write to
// another file still completes. The write is submitted from a thread of its own, so that a
// shared ring would block that thread, not the test; the FIFO is fed either way so that the
// read ends. (The pread env cannot read a FIFO at all: pread(2) answers ESPIPE.)
TEST(FileEnvQueuesTest, AWriteDoesNotWaitBehindABlockedRead) {
  const std::string dir = FreshDir().string();
  FileEnvOptions o;
  o.read_queue_depth = 1;
  o.queue_depth = 1;
  std::unique_ptr<FileEnv> env = MakeEnv("io_uring", o);
  ASSERT_NE(env, nullptr);
  const std::string fifo_path = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo_path.c_str(), 0600), 0) << std::strerror(errno);
  Result<std::unique_ptr<DiskFile>> fifo =
      env->Open(fifo_path, {FileMode::kReadWrite, /*direct=*/false});
  ASSERT_TRUE(fifo.ok()) << fifo.status().ToString();
  Result<std::unique_ptr<DiskFile>> data = env->Open(dir + "/data", {FileMode::kCreate});
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  constexpr size_t kBytes = 4096;
  AlignedBuffer in = Buffer(kBytes), out = Buffer(kBytes);
  FillPattern(out.data(), kBytes, 6);
  const int feed = ::open(fifo_path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(feed, 0) << std::strerror(errno);

  IoEvent read_done, write_done;
  std::atomic<bool> write_submitted{false};
  IoRequest read{IoOp::kRead, fifo->get(), 0, kBytes, in.data()};
  env->Submit({&read, 1}, &read_done);
  std::thread writer([&] {
    IoRequest write{IoOp::kWrite, data->get(), 0, kBytes, out.data()};
    env->Submit({&write, 1}, &write_done);
    write_submitted = true;
  });
  const auto written = [&] { return write_submitted && write_done.Done(); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!written() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool write_finished_first = written() && !read_done.Done();
  EXPECT_EQ(::write(feed, out.data(), kBytes), static_cast<ssize_t>(kBytes));
  ::close(feed);
  writer.join();
  EXPECT_TRUE(read_done.Wait().ok());
  EXPECT_TRUE(write_done.Wait().ok());
  EXPECT_TRUE(write_finished_first) << "the write waited for the read's queue entry";
  EXPECT_EQ(FirstMismatch(in.data(), kBytes, 6), kBytes);
}

// Registered (fixed) buffers, unregistered buffers and the pread pool all see the same bytes,
// whichever engine wrote them.
TEST(FileEnvCrossTest, IoUringAndPreadMoveIdenticalBytes) {
  const std::string dir = FreshDir().string();
  const size_t n = 3 << 20;
  AlignedBuffer fixed = Buffer(n), loose = Buffer(n);
  FileEnvOptions o;
  o.registered_buffers = {fixed.span()};
  std::unique_ptr<FileEnv> uring = MakeEnv("io_uring", o);
  std::unique_ptr<FileEnv> pread = MakeEnv("pread");
  ASSERT_NE(uring, nullptr);
  for (auto [writer, reader] : {std::pair{uring.get(), pread.get()}, {pread.get(), uring.get()}}) {
    const std::string path = dir + "/" + writer->name();
    FillPattern(fixed.data(), n, 5);
    {
      auto f = writer->Open(path, {FileMode::kCreate});
      ASSERT_TRUE(f.ok());
      IoEvent e;
      IoRequest r{IoOp::kWrite, f->get(), 0, n, fixed.data()};
      writer->Submit({&r, 1}, &e);
      ASSERT_TRUE(e.Wait().ok());
    }
    std::memset(fixed.data(), 0, n);
    auto f = reader->Open(path, {FileMode::kRead});
    ASSERT_TRUE(f.ok());
    IoEvent e;
    std::vector<IoRequest> reads = {{IoOp::kRead, f->get(), 0, n, fixed.data()},
                                    {IoOp::kRead, f->get(), 0, n, loose.data()}};
    reader->Submit(reads, &e);
    ASSERT_TRUE(e.Wait().ok());
    EXPECT_EQ(FirstMismatch(fixed.data(), n, 5), n) << writer->name() << " -> " << reader->name();
    EXPECT_EQ(FirstMismatch(loose.data(), n, 5), n) << writer->name() << " -> " << reader->name();
  }
}

}  // namespace
}  // namespace strata
