// The cross-backend op tests' side of one backend (BackendWorkspace): an arena, a stream and an
// event, with host weights of every dtype to put there; and their fixture (CrossBackendTest), the
// CPU and CUDA backends each with a workspace. Shared by cuda_backend_test.cc and
// cuda_kv_q4_backend_test.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/core/check.h"
#include "src/core/dtype.h"
#include "tests/backend/gpu_test_util.h"

namespace strata::testing {

// A weight in one dtype: the bits, and the exact fp32 values they stand for.
struct HostWeight {
  std::vector<float> f32;
  std::vector<uint16_t> bits;
  std::vector<float> values;
};

inline HostWeight MakeWeight(std::mt19937_64& rng, size_t n, DType dtype, float stddev) {
  HostWeight w;
  w.f32 = RandomNormals(rng, n, stddev);
  if (dtype == DType::kF32) {
    w.values = w.f32;
  } else {
    w.bits = dtype == DType::kF16 ? ToHalfBits(w.f32) : ToBf16Bits(w.f32);
    w.values.resize(n);
    ConvertToFloat(dtype, w.bits.data(), w.values.data(), n);
  }
  return w;
}

template <typename T>
std::span<const uint8_t> Bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// The bits of `values` rounded to `type` (kF16 or kBF16, to nearest even).
inline std::vector<uint16_t> HalfBits(const std::vector<float>& values, SpanType type) {
  STRATA_CHECK(type == SpanType::kF16 || type == SpanType::kBF16);
  return type == SpanType::kF16 ? ToHalfBits(values) : ToBf16Bits(values);
}

// `values` rounded to `type` (kF32: as they are), as the fp32 values the rounded elements stand
// for: what the CPU backend is given where the CUDA backend is given activations of `type`.
inline std::vector<float> RoundedTo(const std::vector<float>& values, SpanType type) {
  if (type == SpanType::kF32) return values;
  const std::vector<uint16_t> bits = HalfBits(values, type);
  std::vector<float> rounded(values.size());
  ConvertToFloat(type == SpanType::kF16 ? DType::kF16 : DType::kBF16, bits.data(), rounded.data(),
                 rounded.size());
  return rounded;
}

// One backend's side of a test: an arena that spans are taken from in order, the stream that the
// copies and ops run on, and an event to wait for them. Host vectors given to it must stay until
// the next Read.
class BackendWorkspace {
 public:
  BackendWorkspace(Backend& backend, uint64_t bytes)
      : stream_(backend.MakeStream()), event_(backend.MakeEvent()) {
    auto arena = backend.AllocateDeviceArena(bytes);
    STRATA_CHECK_MSG(arena.ok(), arena.status().ToString().c_str());
    arena_ = std::move(*arena);
  }

  Stream& stream() { return *stream_; }

  // A fresh span of n floats, every byte 0xFF (NaN), so that unwritten outputs show.
  DeviceSpan Floats(size_t n) {
    const DeviceSpan span = Take(n * sizeof(float), SpanType::kF32);
    stream_->Fill(span, 0xFF);
    return span;
  }
  // A fresh span holding `values`.
  DeviceSpan Floats(const std::vector<float>& values) {
    const DeviceSpan span = Take(values.size() * sizeof(float), SpanType::kF32);
    stream_->CopyToDevice(span, Bytes(values));
    return span;
  }
  // A fresh span of n activations of `type` (kF32, kF16 or kBF16), every byte 0xFF (NaN).
  DeviceSpan Activations(size_t n, SpanType type) {
    const DeviceSpan span = Take(n * SpanElementBytes(type), type);
    stream_->Fill(span, 0xFF);
    return span;
  }
  // A fresh span holding `values` rounded to `type` (kF32, kF16 or kBF16). The rounded bits are
  // kept until the next Read, as the copy reads them later.
  DeviceSpan Activations(const std::vector<float>& values, SpanType type) {
    if (type == SpanType::kF32) return Floats(values);
    staged_.push_back(HalfBits(values, type));
    const DeviceSpan span = Take(values.size() * 2, type);
    stream_->CopyToDevice(span, Bytes(staged_.back()));
    return span;
  }
  // `w` as a rows x cols weight of `dtype`.
  DeviceWeight Weight(const HostWeight& w, DType dtype, int64_t rows, int64_t cols = 1) {
    const std::span<const uint8_t> bytes = dtype == DType::kF32 ? Bytes(w.f32) : Bytes(w.bits);
    const DeviceWeight weight{Take(bytes.size(), SpanTypeOf(dtype)), rows, cols};
    stream_->CopyToDevice(weight.data, bytes);
    return weight;
  }
  // A fresh span holding `bytes` as raw bytes.
  DeviceSpan Raw(std::span<const uint8_t> bytes) {
    const DeviceSpan span = Take(bytes.size(), SpanType::kBytes);
    stream_->CopyToDevice(span, bytes);
    return span;
  }
  // A fresh span of `bytes` raw bytes, every one `fill`.
  DeviceSpan Raw(uint64_t bytes, uint8_t fill) {
    const DeviceSpan span = Take(bytes, SpanType::kBytes);
    stream_->Fill(span, fill);
    return span;
  }
  // The elements of `span` (kF32, kF16 or kBF16; a half type widened exactly) once all the work
  // given so far has finished.
  std::vector<float> Read(DeviceSpan span) {
    if (span.type() == SpanType::kF16 || span.type() == SpanType::kBF16) {
      std::vector<uint16_t> bits(span.bytes() / 2);
      stream_->CopyToHost({reinterpret_cast<uint8_t*>(bits.data()), span.bytes()}, span);
      Finish();
      std::vector<float> host(bits.size());
      ConvertToFloat(span.type() == SpanType::kF16 ? DType::kF16 : DType::kBF16, bits.data(),
                     host.data(), host.size());
      return host;
    }
    std::vector<float> host(span.bytes() / sizeof(float));
    stream_->CopyToHost({reinterpret_cast<uint8_t*>(host.data()), span.bytes()}, span);
    Finish();
    return host;
  }
  // The bytes of `span`, likewise.
  std::vector<uint8_t> ReadBytes(DeviceSpan span) {
    std::vector<uint8_t> host(span.bytes());
    stream_->CopyToHost(host, span);
    Finish();
    return host;
  }
  // Waits for all the work given so far, ops that write host memory included.
  void Finish() {
    stream_->Record(*event_);
    event_->HostWait();
    staged_.clear();
  }
  // Spans are taken from the arena's start again. REQUIRES: no work given is pending (a Read
  // since).
  void Reset() { used_ = 0; }

 private:
  DeviceSpan Take(uint64_t bytes, SpanType type) {
    STRATA_CHECK(used_ + bytes <= arena_->capacity_bytes());
    const DeviceSpan span = arena_->Span(used_, bytes, type);
    used_ += (bytes + 255) / 256 * 256;
    return span;
  }

  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Event> event_;
  std::unique_ptr<DeviceArena> arena_;
  uint64_t used_ = 0;
  std::vector<std::vector<uint16_t>> staged_;  // Activations' rounded bits, until copied
};

// The CPU backend and the CUDA backend, each with a workspace of kArenaBytes; skips without a
// CUDA device (GpuTest).
class CrossBackendTest : public GpuTest {
 protected:
  // Enough for the largest case: a 4097 x 1000 fp32 weight and its activations.
  static constexpr uint64_t kArenaBytes = uint64_t{64} << 20;

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    cpu_ = MakeCpuBackend();
    gpu_ = MakeCudaBackend();
    ASSERT_NE(gpu_, nullptr);
    host_ = std::make_unique<BackendWorkspace>(*cpu_, kArenaBytes);
    dev_ = std::make_unique<BackendWorkspace>(*gpu_, kArenaBytes);
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<BackendWorkspace> host_;  // cpu_'s
  std::unique_ptr<BackendWorkspace> dev_;   // gpu_'s
};

}  // namespace strata::testing
