// ReadPieces and WritePieces: scattered pieces of host or device memory reach the file and come
// back byte for byte whatever the ring's size (one slot, two slots, many rounds of both), the
// copies of one slot overlap the other slot's transfers, and a failed transfer ends in its error,
// not a hang.
#include "src/memory/disk_pieces.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "src/backend/cpu/cpu_backend.h"
#include "src/io/aligned_buffer.h"
#include "src/io/fault_env.h"
#include "src/io/io_event.h"
#include "src/io/memory_env.h"
#include "src/io/scratch_file.h"
#include "tests/io/forwarding_env.h"
#include "tests/io/io_test_util.h"

namespace strata {
namespace {

using io_testing::FillPattern;
using io_testing::FirstMismatch;
using io_testing::FreshDir;

constexpr uint64_t kFileBytes = uint64_t{6} << 20;

// Non-overlapping pieces of random sizes (1 byte to 300 KiB) at random offsets of a kFileBytes
// file, with random gaps (none to 100 KiB) between them, each with its own memory.
struct Pieces {
  std::vector<std::vector<uint8_t>> memory;
  std::vector<DiskPiece> pieces;
};
Pieces RandomPieces(uint32_t seed) {
  std::mt19937 rng(seed);
  Pieces p;
  for (uint64_t at = rng() % 5000;;) {
    const uint64_t bytes = 1 + rng() % (300 << 10);
    if (at + bytes > kFileBytes) break;
    p.memory.emplace_back(bytes);
    p.pieces.push_back({at, nullptr, bytes});
    at += bytes + (rng() % 3 == 0 ? 0 : rng() % (100 << 10));
  }
  for (size_t i = 0; i < p.pieces.size(); ++i) p.pieces[i].memory = p.memory[i].data();
  std::shuffle(p.pieces.begin(), p.pieces.end(), rng);  // callers give pieces in any order
  return p;
}

// The whole file, read in one request (independently of the code under test).
std::vector<uint8_t> WholeFile(FileEnv& env, DiskFile* file) {
  Result<AlignedBuffer> buffer = AlignedBuffer::Allocate(kFileBytes);
  EXPECT_TRUE(buffer.ok());
  const IoRequest request{IoOp::kRead, file, 0, kFileBytes, buffer->data()};
  IoEvent event;
  env.Submit({&request, 1}, &event);
  EXPECT_TRUE(event.Wait().ok());
  return {buffer->data(), buffer->data() + kFileBytes};
}

// A scratch file of kFileBytes and a ring of GetParam() bytes.
class DiskPiecesTest : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<FileEnv>> env = NewFileEnv();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_ = std::move(env).value();
    Result<std::unique_ptr<ScratchFile>> scratch =
        ScratchFile::Create(env_.get(), FreshDir().string(), kFileBytes);
    ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
    scratch_ = std::move(scratch).value();
    Result<AlignedBuffer> ring = AlignedBuffer::Allocate(GetParam());
    ASSERT_TRUE(ring.ok());
    ring_ = std::move(ring).value();
  }

  DiskFile* file() const { return scratch_->file(); }

  std::unique_ptr<FileEnv> env_;
  std::unique_ptr<ScratchFile> scratch_;
  AlignedBuffer ring_;
};

TEST_P(DiskPiecesTest, PiecesRoundTripThroughTheRing) {

  Pieces written = RandomPieces(11);
  for (const DiskPiece& p : written.pieces) FillPattern(p.memory, p.bytes, 5, p.file_offset);
  ASSERT_TRUE(WritePieces(*env_, file(), written.pieces, ring_.span()).ok());
  const std::vector<uint8_t> bytes = WholeFile(*env_, file());
  for (const DiskPiece& p : written.pieces) {
    ASSERT_EQ(FirstMismatch(bytes.data() + p.file_offset, p.bytes, 5, p.file_offset), p.bytes)
        << "written piece at " << p.file_offset;
  }

  // Reads of other pieces, within and across the written ones, from the file as just checked.
  Pieces read = RandomPieces(12);
  ASSERT_TRUE(ReadPieces(*env_, file(), read.pieces, ring_.span()).ok());
  for (const DiskPiece& p : read.pieces) {
    ASSERT_EQ(std::memcmp(p.memory, bytes.data() + p.file_offset, p.bytes), 0)
        << "read piece at " << p.file_offset;
  }
}

// The same through device memory: pieces that are spans of a device arena, moved through the ring
// and a stream on a worker thread with random delays (a slot read into or written before its
// copies have run would show in the bytes).
TEST_P(DiskPiecesTest, DevicePiecesRoundTripThroughTheRingAndAStream) {
  auto backend = MakeCpuBackend({.streams = {.threaded = true, .max_delay_us = 200}});
  std::unique_ptr<Stream> stream = backend->MakeStream();
  std::unique_ptr<Event> events[2] = {backend->MakeEvent(), backend->MakeEvent()};
  const DeviceCopies copies{stream.get(), {events[0].get(), events[1].get()}};
  Result<std::unique_ptr<DeviceArena>> arena = backend->AllocateDeviceArena(kFileBytes);
  ASSERT_TRUE(arena.ok());
  // Each piece at its file offset in the arena (the pieces do not overlap in the file).
  const auto on_device = [&](const Pieces& host) {
    std::vector<DiskPiece> out;
    for (const DiskPiece& p : host.pieces) {
      out.push_back({p.file_offset, (*arena)->Span(p.file_offset, p.bytes)});
    }
    return out;
  };

  Pieces written = RandomPieces(21);
  for (const DiskPiece& p : written.pieces) {
    FillPattern(p.memory, p.bytes, 7, p.file_offset);
    stream->CopyToDevice((*arena)->Span(p.file_offset, p.bytes), {p.memory, p.bytes});
  }
  ASSERT_TRUE(WritePieces(*env_, file(), on_device(written), ring_.span(), copies).ok());
  const std::vector<uint8_t> bytes = WholeFile(*env_, file());
  for (const DiskPiece& p : written.pieces) {
    ASSERT_EQ(FirstMismatch(bytes.data() + p.file_offset, p.bytes, 7, p.file_offset), p.bytes)
        << "written piece at " << p.file_offset;
  }

  Pieces read = RandomPieces(22);
  stream->Fill((*arena)->Span(0, kFileBytes), 0);
  ASSERT_TRUE(ReadPieces(*env_, file(), on_device(read), ring_.span(), copies).ok());
  for (const DiskPiece& p : read.pieces) {
    stream->CopyToHost({p.memory, p.bytes}, (*arena)->Span(p.file_offset, p.bytes));
  }
  stream->Synchronize();
  for (const DiskPiece& p : read.pieces) {
    ASSERT_EQ(std::memcmp(p.memory, bytes.data() + p.file_offset, p.bytes), 0)
        << "read piece at " << p.file_offset;
  }
}

// One page (one slot), a few pages, a ring smaller than one slot's minimum, two 1 MiB slots, and
// a ring larger than the file (a quarter of the transfer per slot).
INSTANTIATE_TEST_SUITE_P(RingBytes, DiskPiecesTest,
                         ::testing::Values(4096, 3 * 4096, 192 << 10, 2 << 20, 32 << 20));

// Completes each submission 30 ms after it is made, and records how many earlier submissions were
// still in flight when each was made.
class SlowEnv final : public io_testing::ForwardingEnv {
 public:
  explicit SlowEnv(std::unique_ptr<FileEnv> base) : ForwardingEnv(std::move(base)) {}
  ~SlowEnv() override {
    for (std::thread& t : threads_) t.join();
  }
  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    most_in_flight_ = std::max(most_in_flight_.load(), in_flight_.load());
    ++in_flight_;
    event->AddPending(1);
    threads_.emplace_back([this, r = std::vector<IoRequest>(requests.begin(), requests.end()),
                           event] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      IoEvent inner;
      base().Submit(r, &inner);
      const Status status = inner.Wait();
      --in_flight_;
      event->Complete(status);
    });
  }
  // The most submissions that were in flight when another was made.
  int most_in_flight() const { return most_in_flight_.load(); }

 private:
  std::vector<std::thread> threads_;
  std::atomic<int> in_flight_{0}, most_in_flight_{0};
};

TEST(DiskPiecesOverlapTest, OneSlotIsInFlightWhileTheOtherIsCopied) {
  for (IoOp op : {IoOp::kWrite, IoOp::kRead}) {
    SlowEnv env(NewMemoryEnv());
    Result<std::unique_ptr<ScratchFile>> scratch =
        ScratchFile::Create(&env, FreshDir().string(), kFileBytes);
    ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
    Result<AlignedBuffer> ring = AlignedBuffer::Allocate(8 << 20);
    std::vector<uint8_t> memory(4 << 20);
    const DiskPiece piece{0, memory.data(), memory.size()};
    ASSERT_TRUE(ring.ok());
    const Status s = op == IoOp::kWrite ? WritePieces(env, (*scratch)->file(), {&piece, 1}, ring->span())
                                        : ReadPieces(env, (*scratch)->file(), {&piece, 1}, ring->span());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(env.most_in_flight(), 1) << (op == IoOp::kWrite ? "writes" : "reads");
  }
}

TEST(DiskPiecesFaultTest, AFailedTransferInAnySlotIsTheResult) {
  for (IoFault fault : {IoFault::kReadError, IoFault::kShortRead, IoFault::kWriteError}) {
    auto owned = std::make_unique<FaultInjectingEnv>(NewMemoryEnv());
    FaultInjectingEnv* env = owned.get();
    Result<std::unique_ptr<ScratchFile>> scratch =
        ScratchFile::Create(env, FreshDir().string(), kFileBytes);
    ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
    Result<AlignedBuffer> ring = AlignedBuffer::Allocate(1 << 20);
    ASSERT_TRUE(ring.ok());
    std::vector<uint8_t> memory(kFileBytes);
    const DiskPiece piece{0, memory.data(), memory.size()};
    // A request in the middle of the transfer, several slots in.
    FaultRule rule;
    rule.fault = fault;
    rule.offset_begin = 3 << 20;
    rule.offset_end = rule.offset_begin + 1;
    env->AddRule(rule);
    const Status s = fault == IoFault::kWriteError
                         ? WritePieces(*env, (*scratch)->file(), {&piece, 1}, ring->span())
                         : ReadPieces(*env, (*scratch)->file(), {&piece, 1}, ring->span());
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(env->fired(), 1);
  }
}

}  // namespace
}  // namespace strata
