// The CPU backend: kernels/cpu over host memory. F16/BF16 weights are expanded to fp32 a panel of
// rows at a time into a reusable scratch buffer, so a GEMM never needs a whole fp32 copy. 4-bit
// (kQ4) weights are expanded a whole matrix at a time, as the offloading engine expands them, so
// the GEMM is the same one and gives the same bits; an embedding expands only the rows it reads.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/weight_q4.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/core/check.h"

namespace strata {
namespace {

namespace k = kernels::cpu;

// Rows of a non-F32 weight converted per GEMM panel: large enough for GEMM efficiency, small
// enough to stay in cache.
constexpr int kPanelRows = 256;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {}

  const char* name() const override { return "cpu"; }

  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    return AllocateCpuDeviceArena(bytes);
  }
  std::unique_ptr<Stream> MakeStream() override {
    CpuStreamOptions stream = options_.streams;
    stream.seed += streams_made_++;  // each stream its own delays
    return MakeCpuStream(stream);
  }
  std::unique_ptr<Event> MakeEvent() override { return MakeCpuEvent(); }
  // Its copies are memcpy: nothing to pin.
  Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t>) override {
    return std::make_unique<PinnedHost>();
  }

  void Linear(const float* x, int m, const TensorView& w, const TensorView& bias,
              float* y) override {
    STRATA_CHECK(w.shape.size() == 2);
    const int out = static_cast<int>(w.dim(0));
    const int in = static_cast<int>(w.dim(1));
    if (w.dtype == DType::kF32) {
      k::GemmNT(m, out, in, x, static_cast<const float*>(w.data), y, out, false);
    } else if (w.dtype == DType::kQ4) {
      const auto* planes = static_cast<const Q4Planes*>(w.data);
      expanded_.resize(static_cast<size_t>(out) * in);
      k::ExpandWeightQ4(planes->codes, planes->params, out, in, planes->group, expanded_.data());
      k::GemmNT(m, out, in, x, expanded_.data(), y, out, false);
    } else {
      panel_.resize(static_cast<size_t>(kPanelRows) * in);
      const auto* base = static_cast<const uint8_t*>(w.data);
      for (int r0 = 0; r0 < out; r0 += kPanelRows) {
        const int rows = std::min(kPanelRows, out - r0);
        ConvertRows(w.dtype, base + static_cast<size_t>(r0) * in * 2, rows, in);
        k::GemmNT(m, rows, in, x, panel_.data(), y + r0, out, false);
      }
    }
    if (bias.present()) {
      const float* b = Floats(bias, 0);
#pragma omp parallel for schedule(static)
      for (int i = 0; i < m; ++i) {
        float* yr = y + static_cast<long>(i) * out;
        for (int j = 0; j < out; ++j) yr[j] += b[j];
      }
    }
  }

  void Embed(const TensorView& table, const int32_t* ids, int n, float* out) override {
    const int64_t hidden = table.dim(1);
    if (table.dtype == DType::kQ4) {
      const auto* planes = static_cast<const Q4Planes*>(table.data);
      const int64_t params_per_row = hidden / planes->group * 2;
      for (int i = 0; i < n; ++i) {
        STRATA_CHECK(ids[i] >= 0 && ids[i] < table.dim(0));
        k::ExpandWeightQ4(planes->codes + ids[i] * hidden / 2,
                          planes->params + ids[i] * params_per_row, 1, hidden, planes->group,
                          out + i * hidden);
      }
      return;
    }
    const size_t row_bytes = static_cast<size_t>(hidden) * DTypeBytes(table.dtype);
    const auto* base = static_cast<const uint8_t*>(table.data);
    for (int i = 0; i < n; ++i) {
      STRATA_CHECK(ids[i] >= 0 && ids[i] < table.dim(0));
      ConvertToFloat(table.dtype, base + static_cast<size_t>(ids[i]) * row_bytes,
                     out + static_cast<int64_t>(i) * hidden, static_cast<size_t>(hidden));
    }
  }

  void AddPositionEmbedding(const TensorView& pos_table, const int32_t* positions, int n,
                            float* x) override {
    const int64_t hidden = pos_table.dim(1);
    row_.resize(static_cast<size_t>(hidden));
    for (int i = 0; i < n; ++i) {
      Embed(pos_table, positions + i, 1, row_.data());
      Add(x + i * hidden, row_.data(), hidden);
    }
  }

  void LayerNorm(const float* x, const TensorView& w, const TensorView& b, float eps, int rows,
                 int dim, float* y) override {
    k::LayerNorm(x, Floats(w, 0), b.present() ? Floats(b, 1) : nullptr, eps, rows, dim, y);
  }

  void RmsNorm(const float* x, const TensorView& w, float eps, int rows, int dim,
               float* y) override {
    k::RmsNorm(x, Floats(w, 0), eps, rows, dim, y);
  }

  void Activate(ActivationKind kind, float* x, int64_t n) override {
    if (kind == ActivationKind::kRelu) {
      k::Relu(x, static_cast<size_t>(n));
    } else {
      k::Gelu(x, static_cast<size_t>(n));
    }
  }

  void SiluMul(float* gate, const float* up, int64_t n) override {
    k::SiluMul(gate, up, static_cast<size_t>(n));
  }

  void Rope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
            const float* inv_freq) override {
    k::ApplyRope(x, positions, tokens, heads, head_dim, inv_freq);
  }

  void Attention(const AttentionShape& shape, const float* q, const float* kc, const float* vc,
                 const int* start, float* out) override {
    const k::AttentionShape s{shape.batch,    shape.new_tokens, shape.num_heads, shape.num_kv_heads,
                              shape.head_dim, shape.max_len,    shape.cache_len, shape.scale};
    k::CausalAttention(s, q, kc, vc, start, out);
  }

  void Add(float* x, const float* y, int64_t n) override {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  }

 private:
  void ConvertRows(DType t, const uint8_t* src, int rows, int in) {
    const size_t row_elems = static_cast<size_t>(in);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
      ConvertToFloat(t, src + r * row_elems * 2, panel_.data() + r * row_elems, row_elems);
    }
  }

  // A 1-D tensor as floats: F32 data is used in place; others are converted into one of two
  // small slots (so a weight and a bias can be live at once).
  const float* Floats(const TensorView& t, int slot) {
    if (t.dtype == DType::kF32) return static_cast<const float*>(t.data);
    std::vector<float>& buf = vectors_[slot];
    buf.resize(static_cast<size_t>(t.numel()));
    ConvertToFloat(t.dtype, t.data, buf.data(), buf.size());
    return buf.data();
  }

  const CpuBackendOptions options_;
  uint32_t streams_made_ = 0;
  std::vector<float> panel_;
  std::vector<float> expanded_;  // one kQ4 matrix in fp32
  std::vector<float> row_;
  std::vector<float> vectors_[2];
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

void SetCpuThreads(int n) { k::SetCpuThreads(n); }
int CpuThreads() { return k::CpuThreads(); }

}  // namespace strata
