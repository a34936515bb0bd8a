// MemoryTiers: the device tier is the device backend's arena; disk reads join pieces close
// together in the file in one request (the bytes between them dropped), keep pieces far apart in
// their own, and give every piece its own bytes.
#include "src/memory/memory_tiers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "src/backend/cpu/cpu_backend.h"
#include "tests/io/forwarding_env.h"
#include "tests/io/io_test_util.h"

namespace strata {
namespace {

using io_testing::FillPattern;
using io_testing::FirstMismatch;

// Passes everything on, counting the read requests submitted.
class ReadCountingEnv final : public io_testing::ForwardingEnv {
 public:
  ReadCountingEnv(std::unique_ptr<FileEnv> base, std::atomic<int>* reads)
      : ForwardingEnv(std::move(base)), reads_(reads) {}
  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    for (const IoRequest& r : requests) *reads_ += r.op == IoOp::kRead ? 1 : 0;
    base().Submit(requests, event);
  }

 private:
  std::atomic<int>* reads_;
};

// A GPU extent is a span of the backend's arena: what a stream copies into the span is what the
// engine reads at the extent's address (the CPU backend keeps its arena in host memory).
TEST(MemoryTiersTest, TheDeviceTierIsTheDeviceBackendsArena) {
  TierLayout layout;
  layout.Reserve(Tier::kGpu, MemoryUse::kWeights, "first", 4096);
  const GpuExtent extent = layout.Reserve<Tier::kGpu>(MemoryUse::kKvCache, "second", 1000);
  auto backend = MakeCpuBackend();
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, {}, *backend);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  EXPECT_EQ((*tiers)->capacity_bytes(Tier::kGpu), layout.tier_bytes(Tier::kGpu));
  const DeviceSpan span = (*tiers)->Device(extent);
  ASSERT_EQ(span.bytes(), extent.bytes);
  std::vector<uint8_t> bytes(extent.bytes);
  std::iota(bytes.begin(), bytes.end(), uint8_t{3});
  auto stream = backend->MakeStream();
  stream->CopyToDevice(span, bytes);
  // The whole arena read back: the bytes are where the extent says.
  const uint64_t capacity = (*tiers)->capacity_bytes(Tier::kGpu);
  std::vector<uint8_t> arena(capacity);
  stream->CopyToHost(arena, (*tiers)->Device(GpuExtent{0, capacity}));
  stream->Synchronize();
  EXPECT_EQ(std::memcmp(arena.data() + extent.offset, bytes.data(), bytes.size()), 0);
}

// A device tier the backend cannot give ends the run with the backend's message.
TEST(MemoryTiersTest, ADeviceTierTheBackendCannotGiveIsAnError) {
  TierLayout layout;
  layout.Reserve(Tier::kGpu, MemoryUse::kWeights, "weights", uint64_t{1} << 60);
  auto backend = MakeCpuBackend();
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, {}, *backend);
  ASSERT_FALSE(tiers.ok());
  EXPECT_EQ(tiers.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(tiers.status().message().find("--gpu-memory"), std::string::npos)
      << tiers.status().ToString();
}

TEST(MemoryTiersTest, ReadsJoinPiecesUpTo64KiBApartAndKeepTheOthersApart) {
  constexpr uint64_t kExtentBytes = 1 << 20;
  TierLayout layout;
  const DiskExtent extent =
      layout.Reserve<Tier::kDisk>(MemoryUse::kKvCache, "cache", kExtentBytes, kDirectIoAlignment);
  std::atomic<int> reads{0};
  auto backend = MakeCpuBackend();
  MemoryTiersOptions o;
  o.offload_dir = ::testing::TempDir();
  o.wrap_file_env = [&](std::unique_ptr<FileEnv> base) {
    return std::make_unique<ReadCountingEnv>(std::move(base), &reads);
  };
  Result<std::unique_ptr<MemoryTiers>> tiers = MemoryTiers::Create(layout, o, *backend);
  ASSERT_TRUE(tiers.ok()) << tiers.status().ToString();
  Result<AlignedBuffer> file_bytes = AlignedBuffer::Allocate(kExtentBytes);
  Result<AlignedBuffer> ring = AlignedBuffer::Allocate(256 << 10);
  ASSERT_TRUE(file_bytes.ok() && ring.ok());
  FillPattern(file_bytes->data(), kExtentBytes, 7);
  ASSERT_TRUE((*tiers)->TransferExtent(IoOp::kWrite, extent, file_bytes->data()).ok());

  // Rows of 18 KiB with 16 KiB filled (gaps under a page) and a piece 40 KiB after them: one
  // request for [0, 100 KiB). A piece whose page begins 68 KiB after that, and one far on: one
  // request each.
  struct Span {
    uint64_t offset, bytes;
  };
  const std::vector<Span> spans = {
      {0, 16 << 10},    {18 << 10, 16 << 10},      {36 << 10, 16 << 10},
      {92 << 10, 5000}, {(168 << 10) + 100, 3000}, {600 << 10, 30 << 10}};
  std::vector<std::vector<uint8_t>> got(spans.size());
  std::vector<DiskPiece> pieces;
  for (size_t i = 0; i < spans.size(); ++i) {
    got[i].assign(spans[i].bytes, 0);
    pieces.push_back({extent.offset + spans[i].offset, got[i].data(), spans[i].bytes});
  }
  ASSERT_TRUE((*tiers)->ReadDisk(pieces, ring->span()).ok());
  EXPECT_EQ(reads.load(), 3);
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(FirstMismatch(got[i].data(), spans[i].bytes, 7, spans[i].offset), spans[i].bytes)
        << "piece " << i;
  }
}

}  // namespace
}  // namespace strata
