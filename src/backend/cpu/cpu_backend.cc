// The CPU backend: kernels/cpu over host memory, its device arena being host memory too. Each op
// resolves its spans to addresses and gives the kernel call to the stream (cpu_memory.h): run at
// once, or on the stream's worker thread in the test mode. F16/BF16 weights are expanded to fp32 a
// panel of rows at a time into a reusable scratch buffer of the running thread, so a GEMM never
// needs a whole fp32 copy; half activations are read and stored through fp32
// (cpu_activations.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/weight_q4.h"
#include "src/backend/cpu/cpu_activations.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cpu/cpu_kv_q4.h"
#include "src/backend/q4_sizes.h"
#include "src/core/check.h"

namespace strata {
namespace {

namespace k = kernels::cpu;

// Rows of a non-F32 weight converted per GEMM panel: large enough for GEMM efficiency, small
// enough to stay in cache.
constexpr int kPanelRows = 256;

// A weight's data and element type, as the kernels read it.
struct HostWeight {
  const uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 1;
};

HostWeight Resolve(const DeviceWeight& w) {
  if (!w.present()) return {};
  HostWeight h;
  switch (w.data.type()) {
    case SpanType::kF32: h.dtype = DType::kF32; break;
    case SpanType::kF16: h.dtype = DType::kF16; break;
    case SpanType::kBF16: h.dtype = DType::kBF16; break;
    default: STRATA_CHECK_MSG(false, "a weight is not F32, F16 or BF16");
  }
  STRATA_CHECK(w.data.bytes() == static_cast<uint64_t>(w.numel()) * DTypeBytes(h.dtype));
  h.data = CpuAddress(w.data);
  h.rows = w.rows;
  h.cols = w.cols;
  return h;
}

// A vector weight as fp32: F32 data in place, others converted into `buf`.
const float* VectorFloats(const HostWeight& w, std::vector<float>& buf) {
  if (w.data == nullptr) return nullptr;
  if (w.dtype == DType::kF32) return reinterpret_cast<const float*>(w.data);
  buf.resize(static_cast<size_t>(w.rows * w.cols));
  ConvertToFloat(w.dtype, w.data, buf.data(), buf.size());
  return buf.data();
}

// Table rows ids[i] of `table` into out[i] (accumulated when `add`).
void LookUp(const HostWeight& table, const std::vector<int32_t>& ids, bool add, float* out) {
  const int64_t hidden = table.cols;
  const size_t row_bytes = static_cast<size_t>(hidden) * DTypeBytes(table.dtype);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(hidden));
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dst = out + static_cast<int64_t>(i) * hidden;
    ConvertToFloat(table.dtype, table.data + static_cast<size_t>(ids[i]) * row_bytes,
                   add ? row.data() : dst, static_cast<size_t>(hidden));
    if (add) {
      for (int64_t j = 0; j < hidden; ++j) dst[j] += row[static_cast<size_t>(j)];
    }
  }
}

// A contiguous cache [batch, num_kv_heads, max_len, head_dim] as fp32: in place, or each row's
// slots before cache_len (all the attention reads) converted into `buf`.
const float* CacheFloats(const k::AttentionShape& s, const CpuActivations& cache,
                         std::vector<float>& buf) {
  if (cache.type() == SpanType::kF32) return cache.Read(buf);
  buf.resize(static_cast<size_t>(cache.size()));
  const int64_t row = int64_t{s.max_len} * s.head_dim;
  const int64_t used = int64_t{s.cache_len} * s.head_dim;
  for (int64_t r = 0; r < int64_t{s.batch} * s.num_kv_heads; ++r) {
    cache.ReadInto(r * row, used, buf.data() + r * row);
  }
  return buf.data();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {}

  const char* name() const override { return "cpu"; }
  SpanType ActivationType(DType) const override { return options_.activations; }

  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    return AllocateCpuDeviceArena(bytes);
  }
  std::unique_ptr<Stream> MakeStream() override {
    CpuStreamOptions stream = options_.streams;
    stream.seed += streams_made_++;  // each stream its own delays
    return MakeCpuStream(stream);
  }
  std::unique_ptr<Event> MakeEvent() override { return MakeCpuEvent(); }
  std::unique_ptr<DeviceArena> HostArena(std::span<uint8_t> memory) override {
    return CpuArenaOver(memory);
  }
  // Its copies are memcpy: nothing to pin.
  Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t>) override {
    return std::make_unique<PinnedHost>();
  }

  void Linear(Stream& stream, DeviceSpan x_span, int m, const DeviceWeight& weight,
              const DeviceWeight& bias_weight, DeviceSpan y_span) override {
    const HostWeight w = Resolve(weight);
    const HostWeight bias = Resolve(bias_weight);
    const int out = static_cast<int>(w.rows);
    const int in = static_cast<int>(w.cols);
    STRATA_CHECK(bias.data == nullptr || bias.rows * bias.cols == out);
    const CpuActivations xa(x_span, int64_t{m} * in), ya(y_span, int64_t{m} * out);
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> x_floats, y_floats;
      const float* x = xa.Read(x_floats);
      float* y = ya.Out(y_floats);
      if (w.dtype == DType::kF32) {
        k::GemmNT(m, out, in, x, reinterpret_cast<const float*>(w.data), y, out, false);
      } else {
        thread_local std::vector<float> panel;
        panel.resize(static_cast<size_t>(kPanelRows) * in);
        for (int r0 = 0; r0 < out; r0 += kPanelRows) {
          const int rows = std::min(kPanelRows, out - r0);
          ConvertRows(w.dtype, w.data + static_cast<size_t>(r0) * in * 2, rows, in, panel);
          k::GemmNT(m, rows, in, x, panel.data(), y + r0, out, false);
        }
      }
      if (bias.data != nullptr) {
        thread_local std::vector<float> bias_floats;
        const float* b = VectorFloats(bias, bias_floats);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < m; ++i) {
          float* yr = y + static_cast<long>(i) * out;
          for (int j = 0; j < out; ++j) yr[j] += b[j];
        }
      }
      ya.Commit(y);
    });
  }

  void Embed(Stream& stream, const DeviceWeight& table, std::span<const int32_t> ids,
             DeviceSpan out) override {
    LookUpOn(stream, table, ids, /*add=*/false, out);
  }

  void AddPositionEmbedding(Stream& stream, const DeviceWeight& table,
                            std::span<const int32_t> positions, DeviceSpan x) override {
    LookUpOn(stream, table, positions, /*add=*/true, x);
  }

  void LayerNorm(Stream& stream, DeviceSpan x_span, const DeviceWeight& weight,
                 const DeviceWeight& bias, float eps, int rows, int dim,
                 DeviceSpan y_span) override {
    const HostWeight w = Resolve(weight), b = Resolve(bias);
    STRATA_CHECK(w.rows * w.cols == dim && (b.data == nullptr || b.rows * b.cols == dim));
    const CpuActivations xa(x_span, int64_t{rows} * dim), ya(y_span, int64_t{rows} * dim);
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> w_floats, b_floats, x_floats, y_floats;
      float* y = ya.Out(y_floats);
      k::LayerNorm(xa.Read(x_floats), VectorFloats(w, w_floats), VectorFloats(b, b_floats), eps,
                   rows, dim, y);
      ya.Commit(y);
    });
  }

  void RmsNorm(Stream& stream, DeviceSpan x_span, const DeviceWeight& weight, float eps, int rows,
               int dim, DeviceSpan y_span) override {
    const HostWeight w = Resolve(weight);
    STRATA_CHECK(w.rows * w.cols == dim);
    const CpuActivations xa(x_span, int64_t{rows} * dim), ya(y_span, int64_t{rows} * dim);
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> w_floats, x_floats, y_floats;
      float* y = ya.Out(y_floats);
      k::RmsNorm(xa.Read(x_floats), VectorFloats(w, w_floats), eps, rows, dim, y);
      ya.Commit(y);
    });
  }

  void Activate(Stream& stream, ActivationKind kind, DeviceSpan x_span) override {
    const CpuActivations xa(x_span, x_span.elements());
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> x_floats;
      float* x = xa.Read(x_floats);
      const size_t n = static_cast<size_t>(xa.size());
      if (kind == ActivationKind::kRelu) {
        k::Relu(x, n);
      } else {
        k::Gelu(x, n);
      }
      xa.Commit(x);
    });
  }

  void SiluMul(Stream& stream, DeviceSpan gate_span, DeviceSpan up_span) override {
    const int64_t n = gate_span.elements();
    const CpuActivations gate_a(gate_span, n), up_a(up_span, n);
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> gate_floats, up_floats;
      float* gate = gate_a.Read(gate_floats);
      k::SiluMul(gate, up_a.Read(up_floats), static_cast<size_t>(n));
      gate_a.Commit(gate);
    });
  }

  void Rope(Stream& stream, DeviceSpan x_span, std::span<const int32_t> positions, int heads,
            int head_dim, std::span<const float> inv_freq) override {
    const int tokens = static_cast<int>(positions.size());
    STRATA_CHECK(static_cast<int>(inv_freq.size()) == head_dim / 2);
    const CpuActivations xa(x_span, int64_t{tokens} * heads * head_dim);
    RunOnCpuStream(stream, [=, pos = std::vector<int32_t>(positions.begin(), positions.end()),
                            freq = std::vector<float>(inv_freq.begin(), inv_freq.end())] {
      thread_local std::vector<float> x_floats;
      float* x = xa.Read(x_floats);
      k::ApplyRope(x, pos.data(), tokens, heads, head_dim, freq.data());
      xa.Commit(x);
    });
  }

  void Add(Stream& stream, DeviceSpan x_span, DeviceSpan y_span) override {
    const int64_t n = x_span.elements();
    const CpuActivations xa(x_span, n), ya(y_span, n);
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> x_floats, y_floats;
      float* x = xa.Read(x_floats);
      const float* y = ya.Read(y_floats);
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) x[i] += y[i];
      xa.Commit(x);
    });
  }

  void ExpandWeightQ4(Stream& stream, DeviceSpan codes_span, DeviceSpan params_span,
                      int64_t rows, int64_t cols, int group, DeviceSpan out_span) override {
    STRATA_CHECK(codes_span.bytes() == static_cast<uint64_t>(WeightQ4CodeBytes(rows, cols)) &&
                 params_span.bytes() ==
                     static_cast<uint64_t>(WeightQ4ParamHalves(rows, cols, group)) * 2);
    const uint8_t* codes = CpuAddress(codes_span);
    const auto* params = reinterpret_cast<const uint16_t*>(CpuAddress(params_span));
    const CpuActivations out_a(out_span, rows * cols);
    RunOnCpuStream(stream, [=] {
      thread_local std::vector<float> out_floats;
      float* out = out_a.Out(out_floats);
      k::ExpandWeightQ4(codes, params, rows, cols, group, out);
      out_a.Commit(out);
    });
  }

  void Attention(Stream& stream, const AttentionShape& shape, DeviceSpan q_span,
                 DeviceSpan k_span, DeviceSpan v_span, std::span<const int> start,
                 DeviceSpan out_span) override {
    const k::AttentionShape s{shape.batch,    shape.new_tokens, shape.num_heads, shape.num_kv_heads,
                              shape.head_dim, shape.max_len,    shape.cache_len, shape.scale};
    STRATA_CHECK(static_cast<int>(start.size()) == shape.batch);
    const int64_t queries = int64_t{shape.batch} * shape.new_tokens * shape.num_heads *
                            shape.head_dim;
    const int64_t cache = int64_t{shape.batch} * shape.num_kv_heads * shape.max_len *
                          shape.head_dim;
    const CpuActivations qa(q_span, queries), ka(k_span, cache), va(v_span, cache),
        out_a(out_span, queries);
    RunOnCpuStream(stream, [=, first = std::vector<int>(start.begin(), start.end())] {
      thread_local std::vector<float> q_floats, k_floats, v_floats, out_floats;
      float* out = out_a.Out(out_floats);
      k::CausalAttention(s, qa.Read(q_floats), CacheFloats(s, ka, k_floats),
                         CacheFloats(s, va, v_floats), first.data(), out);
      out_a.Commit(out);
    });
  }

  void WriteKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan v_new,
                 std::span<const int> start, std::span<const KvQ4Row> rows,
                 int row_begin) override {
    CpuWriteKvQ4(stream, step, k_new, v_new, start, rows, row_begin);
  }
  void AttendKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan q, std::span<const int> start,
                  std::span<const KvQ4Row> rows, int row_begin, DeviceSpan out) override {
    CpuAttendKvQ4(stream, step, q, start, rows, row_begin, out);
  }
  void FitKeySmoothing(Stream& stream, const KvQ4Step& step, DeviceSpan k_new,
                       std::span<const int> start, DeviceSpan mean, DeviceSpan scale) override {
    CpuFitKeySmoothing(stream, step, k_new, start, mean, scale);
  }
  void SmoothKeys(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan mean,
                  DeviceSpan scale) override {
    CpuSmoothKeys(stream, step, k_new, mean, scale);
  }
  void ScaleQueries(Stream& stream, const KvQ4Step& step, DeviceSpan q,
                    DeviceSpan scale) override {
    CpuScaleQueries(stream, step, q, scale);
  }

  void SampleTokens(Stream& stream, DeviceSpan logits_span, int vocab, int limit,
                    std::span<const SamplingSpec> specs, std::span<int32_t> out) override {
    STRATA_CHECK(limit >= 1 && limit <= vocab && out.size() == specs.size());
    const float* logits = CpuFloats(logits_span, static_cast<int64_t>(specs.size()) * vocab);
    RunOnCpuStream(stream, [=, rows = std::vector<SamplingSpec>(specs.begin(), specs.end())] {
      thread_local std::vector<std::pair<float, int32_t>> scratch;
      for (size_t i = 0; i < rows.size(); ++i) {
        const SamplingSpec& r = rows[i];
        out[i] = k::SampleToken(logits + i * static_cast<size_t>(vocab), limit,
                                {r.temperature, r.top_p, r.top_k, r.seed}, r.step, scratch);
      }
    });
  }

  void ScoreTokens(Stream& stream, DeviceSpan logits_span, int vocab,
                   std::span<const int32_t> tokens, std::span<double> out) override {
    STRATA_CHECK(out.size() == tokens.size());
    for (const int32_t t : tokens) STRATA_CHECK(t >= 0 && t < vocab);
    const float* logits = CpuFloats(logits_span, static_cast<int64_t>(tokens.size()) * vocab);
    RunOnCpuStream(stream, [=, ids = std::vector<int32_t>(tokens.begin(), tokens.end())] {
      for (size_t i = 0; i < ids.size(); ++i) {
        out[i] = k::LogProbability(logits + i * static_cast<size_t>(vocab), vocab, ids[i]);
      }
    });
  }

 private:
  static void ConvertRows(DType t, const uint8_t* src, int rows, int in,
                          std::vector<float>& panel) {
    const size_t row_elems = static_cast<size_t>(in);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
      ConvertToFloat(t, src + r * row_elems * 2, panel.data() + r * row_elems, row_elems);
    }
  }

  static void LookUpOn(Stream& stream, const DeviceWeight& table_weight,
                       std::span<const int32_t> ids, bool add, DeviceSpan out_span) {
    const HostWeight table = Resolve(table_weight);
    for (const int32_t id : ids) STRATA_CHECK(id >= 0 && id < table.rows);
    const CpuActivations out_a(out_span, static_cast<int64_t>(ids.size()) * table.cols);
    RunOnCpuStream(stream, [=, rows = std::vector<int32_t>(ids.begin(), ids.end())] {
      thread_local std::vector<float> out_floats;
      float* out = add ? out_a.Read(out_floats) : out_a.Out(out_floats);
      LookUp(table, rows, add, out);
      out_a.Commit(out);
    });
  }

  const CpuBackendOptions options_;
  uint32_t streams_made_ = 0;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

void SetCpuThreads(int n) { k::SetCpuThreads(n); }
int CpuThreads() { return k::CpuThreads(); }

}  // namespace strata
