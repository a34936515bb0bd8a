// The CPU backend's ops as stream work (src/backend/backend.h): a chain of every op given to a
// worker-thread stream that sleeps a random while before each piece of work computes what the
// same chain computes inline, bit for bit, although the host arrays it was given (ids, positions,
// frequencies, first slots) are gone when each op returns; and an op's result read on another
// stream without waiting for its event is caught stale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"

namespace strata {
namespace {

constexpr int kTokens = 6, kHidden = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kVocab = 11;

std::vector<float> Values(size_t n, float scale, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.61f * static_cast<float>(i) + seed);
  return v;
}

std::vector<uint16_t> HalfBits(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = FloatToHalf(v[i]);
  return bits;
}

template <typename T>
std::span<const uint8_t> Bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// Every op in a chain on one stream of `backend`; the final buffer, read back.
std::vector<float> RunChain(Backend& backend) {
  auto arena = backend.AllocateDeviceArena(1 << 20);
  EXPECT_TRUE(arena.ok());
  if (!arena.ok()) return {};
  auto stream = backend.MakeStream();
  auto done = backend.MakeEvent();
  uint64_t used = 0;
  const auto take = [&](size_t bytes, SpanType type) {
    const DeviceSpan span = (*arena)->Span(used, bytes, type);
    used += (bytes + 63) / 64 * 64;
    return span;
  };
  // A copy reads its host memory when it runs: the uploads' sources live until the chain ends.
  std::deque<std::vector<uint8_t>> sources;
  const auto upload = [&](const auto& host, SpanType type) {
    const std::span<const uint8_t> bytes = Bytes(host);
    sources.emplace_back(bytes.begin(), bytes.end());
    const DeviceSpan span = take(bytes.size(), type);
    stream->CopyToDevice(span, sources.back());
    return span;
  };
  const size_t rows = kTokens * kHidden;
  const DeviceWeight table{upload(HalfBits(Values(kVocab * kHidden, 0.5f, 1)), SpanType::kF16),
                           kVocab, kHidden};
  const DeviceWeight positions{upload(Values(kTokens * kHidden, 0.1f, 2), SpanType::kF32),
                               kTokens, kHidden};
  const DeviceWeight norm{upload(Values(kHidden, 1.0f, 3), SpanType::kF32), kHidden, 1};
  const int qkv = (kHeads + 2 * kKvHeads) * kHeadDim;
  const DeviceWeight w{upload(HalfBits(Values(qkv * kHidden, 0.2f, 4)), SpanType::kF16), qkv,
                       kHidden};
  const DeviceWeight bias{upload(Values(qkv, 0.05f, 5), SpanType::kF32), qkv, 1};
  const DeviceSpan hidden = take(rows * 4, SpanType::kF32);
  const DeviceSpan normed = take(rows * 4, SpanType::kF32);
  const DeviceSpan projected = take(kTokens * qkv * 4, SpanType::kF32);
  {
    const std::vector<int32_t> ids = {3, 10, 0, 7, 7, 1};
    backend.Embed(*stream, table, ids, hidden);
    const std::vector<int32_t> rows_at = {0, 1, 2, 3, 4, 5};
    backend.AddPositionEmbedding(*stream, positions, rows_at, hidden);
  }
  backend.RmsNorm(*stream, hidden, norm, 1e-5f, kTokens, kHidden, normed);
  backend.Linear(*stream, normed, kTokens, w, bias, projected);
  // q, then k, then v of one sequence: the cache is [kv_heads, slots, head_dim] with
  // kTokens slots, filled from the projection by copies.
  const DeviceSpan q = take(kTokens * kHeads * kHeadDim * 4, SpanType::kF32);
  const DeviceSpan k = take(kKvHeads * kTokens * kHeadDim * 4, SpanType::kF32);
  const DeviceSpan v = take(kKvHeads * kTokens * kHeadDim * 4, SpanType::kF32);
  const uint64_t head = kHeadDim * 4;
  for (int t = 0; t < kTokens; ++t) {
    const uint64_t row = static_cast<uint64_t>(t) * qkv * 4;
    stream->CopyOnDevice(q.Sub(t * kHeads * head, kHeads * head),
                         projected.Sub(row, kHeads * head));
    for (int h = 0; h < kKvHeads; ++h) {
      const uint64_t at = (static_cast<uint64_t>(h) * kTokens + t) * head;
      stream->CopyOnDevice(k.Sub(at, head), projected.Sub(row + (kHeads + h) * head, head));
      stream->CopyOnDevice(v.Sub(at, head),
                           projected.Sub(row + (kHeads + kKvHeads + h) * head, head));
    }
  }
  {
    std::vector<float> inv_freq(kHeadDim / 2);
    for (int i = 0; i < kHeadDim / 2; ++i) inv_freq[i] = std::pow(100.0f, -2.0f * i / kHeadDim);
    const std::vector<int32_t> at = {0, 1, 2, 3, 4, 5};
    backend.Rope(*stream, q, at, kHeads, kHeadDim, inv_freq);
  }
  const DeviceSpan attn = take(q.bytes(), SpanType::kF32);
  {
    AttentionShape shape{1, kTokens, kHeads, kKvHeads, kHeadDim, kTokens, kTokens, 0.35f};
    const std::vector<int> start = {1};
    backend.Attention(*stream, shape, q, k, v, start, attn);
  }
  backend.SiluMul(*stream, attn, q);
  backend.Add(*stream, attn, q);
  backend.LayerNorm(*stream, attn, DeviceWeight{upload(Values(kHeads * kHeadDim, 1.0f, 6),
                                                       SpanType::kF32),
                                                kHeads * kHeadDim, 1},
                    DeviceWeight{}, 1e-5f, kTokens, kHeads * kHeadDim, attn);
  backend.Activate(*stream, ActivationKind::kGelu, attn);
  std::vector<float> out(attn.bytes() / 4);
  stream->CopyToHost({reinterpret_cast<uint8_t*>(out.data()), attn.bytes()}, attn);
  stream->Record(*done);
  done->HostWait();
  return out;
}

TEST(CpuOpsStreamsTest, OpsOnADelayedWorkerStreamComputeWhatTheyComputeInline) {
  auto inline_backend = MakeCpuBackend();
  const std::vector<float> want = RunChain(*inline_backend);
  ASSERT_FALSE(want.empty());
  for (float x : want) ASSERT_TRUE(std::isfinite(x));
  CpuBackendOptions o;
  o.streams = {.threaded = true, .max_delay_us = 500, .seed = 3};
  auto delayed = MakeCpuBackend(o);
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> got = RunChain(*delayed);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "round " << round;
  }
}

// An op's output read on another stream without waiting for the op's event is stale in some of a
// few rounds (if not, the test above proves nothing about order).
TEST(CpuOpsStreamsTest, ReadingAnOpsResultWithoutItsEventIsCaught) {
  CpuBackendOptions o;
  o.streams = {.threaded = true, .max_delay_us = 3000, .seed = 5};
  auto backend = MakeCpuBackend(o);
  const std::vector<float> ones(256, 1.0f);
  int stale = 0;
  for (int round = 0; round < 20 && stale == 0; ++round) {
    auto arena = backend->AllocateDeviceArena(4096);
    ASSERT_TRUE(arena.ok());
    const DeviceSpan x = (*arena)->Span(0, 1024, SpanType::kF32);
    const DeviceSpan y = (*arena)->Span(1024, 1024, SpanType::kF32);
    auto compute = backend->MakeStream(), reader = backend->MakeStream();
    compute->CopyToDevice(x, Bytes(ones));
    compute->CopyToDevice(y, Bytes(ones));
    compute->Synchronize();
    backend->Add(*compute, x, y);  // x = 2
    std::vector<float> out(256, 0.0f);
    reader->CopyToHost({reinterpret_cast<uint8_t*>(out.data()), 1024}, x);  // no Wait
    reader->Synchronize();
    compute->Synchronize();
    if (out[0] != 2.0f) ++stale;
  }
  EXPECT_GT(stale, 0) << "20 rounds without the wait all read the op's result";
}

}  // namespace
}  // namespace strata
