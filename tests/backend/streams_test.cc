// The memory half of the backend interface (src/backend/memory.h) on every backend: arenas and
// their spans, copies on streams, and the order events give. One test body, run on the CPU backend
// with inline streams, on it again with worker-thread streams that sleep a random while before each
// piece of work (so that only an event can order two streams), and, in the gpu-labelled build of
// this file (STRATA_STREAMS_CUDA), on the CUDA backend, skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#ifdef STRATA_STREAMS_CUDA
#include "src/backend/cuda/cuda_backend.h"
#endif

namespace strata {
namespace {

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return v;
}

std::unique_ptr<Backend> MakeBackend(const std::string& kind, std::string* skip) {
  if (kind == "cpu") return MakeCpuBackend();
  if (kind == "cpu_delayed") {
    CpuBackendOptions o;
    o.streams = {.threaded = true, .max_delay_us = 2000, .seed = 7};
    return MakeCpuBackend(o);
  }
#ifdef STRATA_STREAMS_CUDA
  if (kind == "cuda") {
    auto backend = MakeCudaBackend({}, skip);
    return backend;
  }
#endif
  *skip = "unknown backend " + kind;
  return nullptr;
}

class StreamsTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string skip;
    backend_ = MakeBackend(GetParam(), &skip);
    if (backend_ == nullptr) GTEST_SKIP() << skip;
  }
  std::unique_ptr<Backend> backend_;
};

TEST_P(StreamsTest, SpansAreTypedSlicesOfTheirArena) {
  auto arena = backend_->AllocateDeviceArena(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_EQ((*arena)->capacity_bytes(), uint64_t{1} << 20);
  const DeviceSpan all = (*arena)->Span(0, 1 << 20);
  EXPECT_EQ(all.type(), SpanType::kBytes);
  const DeviceSpan weights = all.Sub(4096, 8192, SpanType::kF16);
  EXPECT_EQ(weights.type(), SpanType::kF16);
  EXPECT_EQ(weights.bytes(), 8192u);
  EXPECT_TRUE(weights.Overlaps(all.Sub(8000, 100)));
  EXPECT_FALSE(weights.Overlaps(all.Sub(12288, 100)));
  EXPECT_EQ(weights.Sub(0, 8192), weights);
  EXPECT_NE(weights.Sub(0, 8192, SpanType::kQ4), weights);
  EXPECT_EQ(SpanTypeOf(DType::kBF16), SpanType::kBF16);
}

TEST_P(StreamsTest, BytesGoThereAndBackOnOneStream) {
  constexpr size_t kBytes = (size_t{3} << 20) + 123;
  auto arena = backend_->AllocateDeviceArena(2 * kBytes + 4096);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  const DeviceSpan a = (*arena)->Span(0, kBytes), b = (*arena)->Span(kBytes + 4096, kBytes);
  const std::vector<uint8_t> in = Pattern(kBytes, 3);
  std::vector<uint8_t> out(kBytes, 0), filled(kBytes, 0);
  auto stream = backend_->MakeStream();
  stream->CopyToDevice(a, in);
  stream->CopyOnDevice(b, a);
  stream->CopyToHost(out, b);
  stream->Fill(a, 0xA5);
  stream->CopyToHost(filled, a);
  stream->Synchronize();
  EXPECT_EQ(out, in);
  EXPECT_EQ(filled, std::vector<uint8_t>(kBytes, 0xA5));
}

// Pinned host memory (the host tier, the staging windows) is copied to and from the device as any
// other, and unpinned when its handle goes.
TEST_P(StreamsTest, PinnedHostMemoryCopiesBothWays) {
  constexpr size_t kBytes = (size_t{5} << 20) + 77;
  const std::vector<uint8_t> pattern = Pattern(kBytes, 9);
  std::vector<uint8_t> host = pattern;
  auto arena = backend_->AllocateDeviceArena(kBytes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  auto stream = backend_->MakeStream();
  {
    auto pinned = backend_->PinHostMemory(host);
    ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
    stream->CopyToDevice((*arena)->Span(0, kBytes), host);
    stream->Synchronize();
    std::fill(host.begin(), host.end(), 0);
    stream->CopyToHost(host, (*arena)->Span(0, kBytes));
    stream->Synchronize();
  }
  EXPECT_EQ(host, pattern);
  auto again = backend_->PinHostMemory(host);  // unpinned above, so it can be pinned again
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

// A load stream fills a slot, a compute stream copies it on; only the event orders them. Many rounds
// through two slots, each reused as soon as its last reader's event says so, as the executor
// reuses its buffers.
TEST_P(StreamsTest, EventsOrderTwoStreams) {
  constexpr size_t kBytes = size_t{1} << 20;
  constexpr int kRounds = 12;
  auto arena = backend_->AllocateDeviceArena(4 * kBytes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  auto load = backend_->MakeStream(), compute = backend_->MakeStream();
  std::unique_ptr<Event> loaded[2] = {backend_->MakeEvent(), backend_->MakeEvent()};
  std::unique_ptr<Event> consumed[2] = {backend_->MakeEvent(), backend_->MakeEvent()};
  std::vector<std::vector<uint8_t>> in, out(kRounds, std::vector<uint8_t>(kBytes, 0));
  for (int r = 0; r < kRounds; ++r) in.push_back(Pattern(kBytes, static_cast<uint8_t>(r)));
  for (int r = 0; r < kRounds; ++r) {
    const int s = r % 2;
    const DeviceSpan slot = (*arena)->Span(s * kBytes, kBytes);
    const DeviceSpan result = (*arena)->Span((2 + s) * kBytes, kBytes);
    load->Wait(*consumed[s]);
    load->CopyToDevice(slot, in[r]);
    load->Record(*loaded[s]);
    compute->Wait(*loaded[s]);
    compute->CopyOnDevice(result, slot);
    compute->CopyToHost(out[r], result);
    compute->Record(*consumed[s]);
  }
  consumed[0]->HostWait();
  consumed[1]->HostWait();
  EXPECT_TRUE(consumed[0]->Query());
  EXPECT_TRUE(consumed[1]->Query());
  for (int r = 0; r < kRounds; ++r) EXPECT_EQ(out[r], in[r]) << "round " << r;
}

TEST_P(StreamsTest, AnEventNeverRecordedIsComplete) {
  auto event = backend_->MakeEvent();
  EXPECT_TRUE(event->Query());
  event->HostWait();
}

TEST_P(StreamsTest, AnArenaTooLargeIsAnErrorThatSaysWhatToDo) {
  auto arena = backend_->AllocateDeviceArena(uint64_t{1} << 60);
  ASSERT_FALSE(arena.ok());
  EXPECT_EQ(arena.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(arena.status().message().find("--gpu-memory"), std::string::npos)
      << arena.status().message();
}

#ifdef STRATA_STREAMS_CUDA
INSTANTIATE_TEST_SUITE_P(Cuda, StreamsTest, testing::Values("cuda"));
#else
INSTANTIATE_TEST_SUITE_P(Cpu, StreamsTest, testing::Values("cpu", "cpu_delayed"));

// The delayed streams make order a matter of events alone: a reader stream that skips its wait sees
// the slot before the writer stream's copy lands, in some of a few rounds. (If this passes the
// events test above proves nothing.)
TEST(CpuDelayedStreams, DroppingTheWaitIsCaught) {
  CpuBackendOptions o;
  o.streams = {.threaded = true, .max_delay_us = 3000, .seed = 11};
  auto backend = MakeCpuBackend(o);
  constexpr size_t kBytes = 4096;
  int stale = 0;
  for (int round = 0; round < 20 && stale == 0; ++round) {
    auto arena = backend->AllocateDeviceArena(kBytes);
    ASSERT_TRUE(arena.ok());
    const DeviceSpan slot = (*arena)->Span(0, kBytes);
    auto writer = backend->MakeStream(), reader = backend->MakeStream();
    auto written = backend->MakeEvent();
    const std::vector<uint8_t> in(kBytes, 0x5C);
    std::vector<uint8_t> out(kBytes, 0);
    writer->CopyToDevice(slot, in);
    writer->Record(*written);
    reader->CopyToHost(out, slot);  // no reader->Wait(*written)
    reader->Synchronize();
    writer->Synchronize();
    if (out != in) ++stale;
  }
  EXPECT_GT(stale, 0) << "20 rounds without the wait all read the written bytes";
}
#endif

}  // namespace
}  // namespace strata
