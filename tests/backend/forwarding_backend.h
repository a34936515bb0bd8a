// ForwardingBackend: a Backend that hands every op to another (the CPU backend by default), for
// tests that change one part of a backend's behaviour (its scratch, the formats it runs) and keep
// the rest real. Subclasses override what they test.
#pragma once

#include <memory>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"

namespace strata {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> base = MakeCpuBackend())
      : base_(std::move(base)) {}

  const char* name() const override { return base_->name(); }
  uint64_t ScratchBytes(const OpLimits& limits) const override {
    return base_->ScratchBytes(limits);
  }
  Status ReserveScratch(const OpLimits& limits) override { return base_->ReserveScratch(limits); }
  Status SupportsKvQ4(const KvQ4Format& format, int head_dim) const override {
    return base_->SupportsKvQ4(format, head_dim);
  }
  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    return base_->AllocateDeviceArena(bytes);
  }
  std::unique_ptr<Stream> MakeStream() override { return base_->MakeStream(); }
  std::unique_ptr<Event> MakeEvent() override { return base_->MakeEvent(); }
  std::unique_ptr<DeviceArena> HostArena(std::span<uint8_t> memory) override {
    return base_->HostArena(memory);
  }
  Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t> memory) override {
    return base_->PinHostMemory(memory);
  }
  void Linear(Stream& s, DeviceSpan x, int m, const DeviceWeight& w, const DeviceWeight& b,
              DeviceSpan y) override {
    base_->Linear(s, x, m, w, b, y);
  }
  void Embed(Stream& s, const DeviceWeight& t, std::span<const int32_t> ids,
             DeviceSpan out) override {
    base_->Embed(s, t, ids, out);
  }
  void AddPositionEmbedding(Stream& s, const DeviceWeight& t, std::span<const int32_t> p,
                            DeviceSpan x) override {
    base_->AddPositionEmbedding(s, t, p, x);
  }
  void LayerNorm(Stream& s, DeviceSpan x, const DeviceWeight& w, const DeviceWeight& b, float eps,
                 int rows, int dim, DeviceSpan y) override {
    base_->LayerNorm(s, x, w, b, eps, rows, dim, y);
  }
  void RmsNorm(Stream& s, DeviceSpan x, const DeviceWeight& w, float eps, int rows, int dim,
               DeviceSpan y) override {
    base_->RmsNorm(s, x, w, eps, rows, dim, y);
  }
  void Activate(Stream& s, ActivationKind k, DeviceSpan x) override { base_->Activate(s, k, x); }
  void SiluMul(Stream& s, DeviceSpan g, DeviceSpan u) override { base_->SiluMul(s, g, u); }
  void Rope(Stream& s, DeviceSpan x, std::span<const int32_t> p, int heads, int head_dim,
            std::span<const float> f) override {
    base_->Rope(s, x, p, heads, head_dim, f);
  }
  void Add(Stream& s, DeviceSpan x, DeviceSpan y) override { base_->Add(s, x, y); }
  void ExpandWeightQ4(Stream& s, DeviceSpan c, DeviceSpan p, int64_t rows, int64_t cols, int group,
                      DeviceSpan out) override {
    base_->ExpandWeightQ4(s, c, p, rows, cols, group, out);
  }
  void Attention(Stream& s, const AttentionShape& shape, DeviceSpan q, DeviceSpan k, DeviceSpan v,
                 std::span<const int> start, DeviceSpan out) override {
    base_->Attention(s, shape, q, k, v, start, out);
  }
  void WriteKvQ4(Stream& s, const KvQ4Step& step, DeviceSpan k, DeviceSpan v,
                 std::span<const int> start, std::span<const KvQ4Row> rows,
                 int row_begin) override {
    base_->WriteKvQ4(s, step, k, v, start, rows, row_begin);
  }
  void AttendKvQ4(Stream& s, const KvQ4Step& step, DeviceSpan q, std::span<const int> start,
                  std::span<const KvQ4Row> rows, int row_begin, DeviceSpan out) override {
    base_->AttendKvQ4(s, step, q, start, rows, row_begin, out);
  }
  void FitKeySmoothing(Stream& s, const KvQ4Step& step, DeviceSpan k, std::span<const int> start,
                       DeviceSpan mean, DeviceSpan scale) override {
    base_->FitKeySmoothing(s, step, k, start, mean, scale);
  }
  void SmoothKeys(Stream& s, const KvQ4Step& step, DeviceSpan k, DeviceSpan mean,
                  DeviceSpan scale) override {
    base_->SmoothKeys(s, step, k, mean, scale);
  }
  void ScaleQueries(Stream& s, const KvQ4Step& step, DeviceSpan q, DeviceSpan scale) override {
    base_->ScaleQueries(s, step, q, scale);
  }
  void SampleTokens(Stream& s, DeviceSpan logits, int vocab, int limit,
                    std::span<const SamplingSpec> specs, std::span<int32_t> out) override {
    base_->SampleTokens(s, logits, vocab, limit, specs, out);
  }
  void ScoreTokens(Stream& s, DeviceSpan logits, int vocab, std::span<const int32_t> tokens,
                   std::span<double> out) override {
    base_->ScoreTokens(s, logits, vocab, tokens, out);
  }

 protected:
  std::unique_ptr<Backend> base_;
};

}  // namespace strata
