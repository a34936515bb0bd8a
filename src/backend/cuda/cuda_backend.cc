// CudaBackend: Backend ops as kernel launches and cuBLAS calls on the caller's streams, over spans
// of the backend's arenas (see cuda_backend.h for the memory contract).
#include "src/backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_memory.h"
#include "src/backend/cuda/cuda_resources.h"
#include "src/backend/cuda/cuda_scratch.h"
#include "src/backend/cuda/cuda_status.h"
#include "src/backend/cuda/gemm.h"
#include "src/backend/cuda/gemm_lt.h"
#include "src/backend/cuda/gemm_plans.h"
#include "src/backend/cuda/ops.h"
#include "src/backend/q4_sizes.h"
#include "src/core/check.h"

namespace strata {
namespace {

using kernels::cuda::ElemType;

// The fp32 elements of a span that is always fp32 (logits, the 4-bit cache's exact rows and key
// smoothing) of `n` elements.
float* Floats(const DeviceSpan& span, int64_t n) {
  STRATA_CHECK_MSG(span.type() == SpanType::kF32, "a span that must be fp32 is not");
  STRATA_CHECK(span.bytes() == static_cast<uint64_t>(n) * sizeof(float));
  return static_cast<float*>(CudaAddress(span));
}

// The kernels' element type of a dense span type. REQUIRES (checked): kF32, kF16 or kBF16.
ElemType ElemTypeOf(SpanType type) {
  STRATA_CHECK_MSG(type == SpanType::kF32 || type == SpanType::kF16 || type == SpanType::kBF16,
                   "a span is not F32, F16 or BF16");
  return type == SpanType::kF32   ? ElemType::kF32
         : type == SpanType::kF16 ? ElemType::kF16
                                  : ElemType::kBF16;
}

// The span type of a kernels' element type.
SpanType SpanTypeOfElem(ElemType type) {
  return type == ElemType::kF32   ? SpanType::kF32
         : type == ElemType::kF16 ? SpanType::kF16
                                  : SpanType::kBF16;
}

// Activations as the kernels see them: device data of one element type.
struct Activations {
  void* data = nullptr;
  ElemType type = ElemType::kF32;
};

// The `n` elements of an activation span. REQUIRES (checked): kF32, kF16 or kBF16, exactly n
// elements.
Activations ActivationsOf(const DeviceSpan& span, int64_t n) {
  const ElemType type = ElemTypeOf(span.type());
  STRATA_CHECK(span.bytes() == static_cast<uint64_t>(n) * SpanElementBytes(span.type()));
  return {CudaAddress(span), type};
}

// Checks that the activation spans of an op are of one type (Backend: "all of one type within an
// op").
void CheckOneType(std::initializer_list<DeviceSpan> spans) {
  for (const DeviceSpan& span : spans) {
    STRATA_CHECK_MSG(span.type() == spans.begin()->type(),
                     "an op's activations are not all of one type");
  }
}

// A weight as the kernels see it: device data of one element type.
struct DeviceTensor {
  const void* data = nullptr;
  ElemType type = ElemType::kF32;
};

// The elements of a present weight. REQUIRES (checked): an F32, F16 or BF16 span of exactly
// rows x cols elements.
DeviceTensor Elements(const DeviceWeight& w) {
  const ElemType type = ElemTypeOf(w.data.type());
  STRATA_CHECK(w.rows >= 0 && w.cols >= 0 &&
               w.data.bytes() ==
                   static_cast<uint64_t>(w.numel()) * SpanElementBytes(w.data.type()));
  return {CudaAddress(w.data), type};
}

using kernels::cuda::Q4ChannelRow;

bool AlignedTo(const void* p, uint64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Elements of a step's k_new or v_new: [batch * tokens, num_kv_heads * head_dim].
int64_t StepKvFloats(const KvQ4Step& step) {
  return int64_t{step.batch} * step.tokens * step.num_kv_heads * step.head_dim;
}

// Checks a 4-bit cache op's step against the Backend contract and against the cache formats the
// CUDA kernels run, saying which format it does not run yet rather than computing it wrongly.
// Whether the CUDA kernels run the 4-bit cache in `f` at head_dim `d` (Backend::SupportsKvQ4).
Status KvQ4Support(const KvQ4Format& f, int d) {
  const std::string head = "head_dim " + std::to_string(d);
  if (f.keys_by_channel) {
    if (f.rotate_keys) {
      return Status::Unsupported(
          "the CUDA backend does not yet run rotated 4-bit keys by channel (its key group writer "
          "reads the keys unrotated); use keys by channel unrotated (--cache-keys channel)");
    }
    if (f.window < kKvQ4ChannelGroup) {
      return Status::Unsupported("4-bit keys by channel need an exact window of at least one key "
                                 "group (--cache-window " +
                                 std::to_string(kKvQ4ChannelGroup) + " or more)");
    }
    if (!cuda_ops::Q4ChannelHeadDimSupported(d)) {
      return Status::Unsupported("the CUDA backend runs the 4-bit cache with keys by channel at "
                                 "head_dim 64, 80, 96, 128 or 256, and this model's is " + head +
                                 "; run without --compress-cache, or with --device cpu");
    }
    return Status::Ok();
  }
  if (f.exact()) {
    return Status::Unsupported(
        "the CUDA backend does not yet run 4-bit per-token keys with exact tokens; use the "
        "default keys by channel, or --cache-sink 0 --cache-window 0");
  }
  if (d != 64 && d != 128) {
    return Status::Unsupported("the CUDA backend runs 4-bit per-token keys at head_dim 64 or 128, "
                               "and this model's is " + head +
                               "; run without --compress-cache, or with --device cpu");
  }
  return Status::Ok();
}

void CheckKvQ4Step(const KvQ4Step& step, std::span<const int> start, size_t row_count,
                   int row_begin) {
  const KvQ4Format& f = step.format;
  const int d = step.head_dim;
  STRATA_CHECK(step.batch >= 0 && step.num_kv_heads > 0 &&
               step.num_heads % step.num_kv_heads == 0 && step.tokens >= 1 &&
               step.cache_len >= step.tokens && f.sink >= 0 && f.window >= 0);
  STRATA_CHECK(static_cast<int>(start.size()) == step.batch);
  STRATA_CHECK(row_begin >= 0 &&
               static_cast<int64_t>(row_begin) + static_cast<int64_t>(row_count) <=
                   int64_t{step.batch} * step.num_kv_heads);
  const Status supported = KvQ4Support(f, d);
  STRATA_CHECK_MSG(supported.ok(), supported.message().c_str());
}

// The device addresses of a 4-bit cache row as the kernels take them. REQUIRES (checked): its
// planes hold at least stride >= cache_len slots (and its exact rows sink + window head vectors
// when the format keeps them), aligned for the kernels' widest loads at any slot.
Q4ChannelRow RowAddresses(const KvQ4Step& step, const KvQ4Row& row) {
  const KvQ4Format& f = step.format;
  const int d = step.head_dim;
  const uint64_t slots = static_cast<uint64_t>(row.stride);
  const int code_bytes = KvQ4CodeBytes(d);
  const int k_param_bytes =
      2 * (f.keys_by_channel ? KvQ4ChannelParamHalves(d) : KvQ4ParamHalves(d));
  const int v_param_bytes = 2 * KvQ4ParamHalves(d);
  STRATA_CHECK(row.stride >= step.cache_len);
  STRATA_CHECK(row.k_codes.bytes() >= slots * code_bytes &&
               row.v_codes.bytes() >= slots * code_bytes &&
               row.k_params.bytes() >= slots * k_param_bytes &&
               row.v_params.bytes() >= slots * v_param_bytes);
  Q4ChannelRow r;
  r.k_codes = static_cast<uint8_t*>(CudaAddress(row.k_codes));
  r.k_params = static_cast<uint16_t*>(CudaAddress(row.k_params));
  r.v_codes = static_cast<uint8_t*>(CudaAddress(row.v_codes));
  r.v_params = static_cast<uint16_t*>(CudaAddress(row.v_params));
  r.stride = row.stride;
  // Keys by channel load a group's key params and a token's value params whole (up to 16
  // bytes); per-token decode attention loads params 8 bytes at a time.
  const uint64_t k_param_align = f.keys_by_channel ? std::min(16, k_param_bytes) : 8;
  const uint64_t v_param_align = f.keys_by_channel ? std::min(16, v_param_bytes) : 8;
  bool aligned = AlignedTo(r.k_codes, 16) && AlignedTo(r.v_codes, 16) &&
                 AlignedTo(r.k_params, k_param_align) && AlignedTo(r.v_params, v_param_align);
  if (f.exact()) {
    const uint64_t exact_bytes = static_cast<uint64_t>(f.sink + f.window) * d * sizeof(float);
    STRATA_CHECK(row.k_exact.bytes() >= exact_bytes && row.v_exact.bytes() >= exact_bytes);
    r.k_exact = static_cast<float*>(CudaAddress(row.k_exact));
    r.v_exact = static_cast<float*>(CudaAddress(row.v_exact));
    aligned = aligned && AlignedTo(r.k_exact, 16) && AlignedTo(r.v_exact, 16);
  }
  STRATA_CHECK_MSG(aligned, "a 4-bit cache row's planes are not aligned as the CUDA kernels need");
  return r;
}

// A run of an op's rows that the table-of-rows kernels take in one launch. The kernels index
// rows b * num_kv_heads + h of whole sequences, so a run is either `batch` whole sequences from
// sequence b, or one row (KV head `head` of sequence b, of a sequence the op's rows only partly
// cover) taken as a sequence of one KV head.
struct RowRun {
  int index = 0;  // of the run's first row among the op's rows
  int b = 0;
  int batch = 1;
  int head = -1;  // the single row's KV head; -1 for whole sequences
};

std::vector<RowRun> RowRuns(int num_kv_heads, int row_begin, int row_count) {
  std::vector<RowRun> runs;
  const int row_end = row_begin + row_count;
  for (int r = row_begin; r < row_end;) {
    const int whole = r % num_kv_heads == 0 ? (row_end - r) / num_kv_heads : 0;
    if (whole > 0) {
      runs.push_back({r - row_begin, r / num_kv_heads, whole, -1});
      r += whole * num_kv_heads;
    } else {
      runs.push_back({r - row_begin, r / num_kv_heads, 1, r % num_kv_heads});
      ++r;
    }
  }
  return runs;
}

// KV head h of sequence b of a step's k_new or v_new (token-major) gathered into
// dst[tokens, head_dim], on `s`.
void GatherHead(const KvQ4Step& step, const float* rows, int b, int h, float* dst, cudaStream_t s) {
  const size_t head_bytes = sizeof(float) * static_cast<size_t>(step.head_dim);
  const float* src = rows + (int64_t{b} * step.tokens * step.num_kv_heads + h) * step.head_dim;
  STRATA_CUDA_CHECK(cudaMemcpy2DAsync(dst, head_bytes, src, head_bytes * step.num_kv_heads,
                                      head_bytes, static_cast<size_t>(step.tokens),
                                      cudaMemcpyDeviceToDevice, s));
}

// Whether a row is drawn greedily (SamplingSpec): the sampler then needs no workspace for it.
bool Greedy(const SamplingSpec& spec) { return spec.temperature <= 0.0f || spec.top_k == 1; }

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options)
      : options_(options), blas_(/*stream=*/nullptr, /*workspace_bytes=*/0) {}

  const char* name() const override { return "cuda"; }

  // fp16, or bf16 for a model trained in it (fp16's range would overflow its activations); what
  // CudaBackendOptions::activations says when it says.
  SpanType ActivationType(DType weights) const override {
    if (options_.activations) return *options_.activations;
    return weights == DType::kBF16 ? SpanType::kBF16 : SpanType::kF16;
  }

  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    return AllocateCudaDeviceArena(bytes);
  }
  std::unique_ptr<Stream> MakeStream() override { return MakeCudaBackendStream(); }
  std::unique_ptr<Event> MakeEvent() override { return MakeCudaEvent(); }
  // Its kernels read device memory only.
  std::unique_ptr<DeviceArena> HostArena(std::span<uint8_t>) override { return nullptr; }
  Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t> memory) override {
    return PinCudaHostMemory(memory);
  }
  Status SupportsKvQ4(const KvQ4Format& format, int head_dim) const override {
    return KvQ4Support(format, head_dim);
  }

  uint64_t ScratchBytes(const OpLimits& limits) const override {
    return ScratchLayout(limits).total_bytes;
  }

  Status ReserveScratch(const OpLimits& limits) override {
    const CudaScratchLayout layout = ScratchLayout(limits);
    // The old reservation goes first (its cudaFree waits for the ops still reading it).
    for (ScratchBuffer& b : buffers_) b.Release();
    scratch_ = DeviceBuffer();
    STRATA_ASSIGN_OR_RETURN(scratch_, AllocateCudaScratch(layout.total_bytes));
    for (int i = 0; i < kCudaScratchBuffers; ++i) {
      buffers_[i].Bind(scratch_.as<uint8_t>() + layout.offset[i], layout.bytes[i]);
    }
    return Status::Ok();
  }

  void Linear(Stream& stream, DeviceSpan x, int m, const DeviceWeight& w, const DeviceWeight& bias,
              DeviceSpan y) override {
    RunLinear(stream, x, m, w, bias, y, /*relu=*/false);
  }

  void LinearRelu(Stream& stream, DeviceSpan x, int m, const DeviceWeight& w,
                  const DeviceWeight& bias, DeviceSpan y) override {
    RunLinear(stream, x, m, w, bias, y, /*relu=*/true);
  }

  void Embed(Stream& stream, const DeviceWeight& table, std::span<const int32_t> ids,
             DeviceSpan out) override {
    LookUp(stream, table, ids, /*accumulate=*/false, out);
  }

  void AddPositionEmbedding(Stream& stream, const DeviceWeight& table,
                            std::span<const int32_t> positions, DeviceSpan x) override {
    LookUp(stream, table, positions, /*accumulate=*/true, x);
  }

  void LayerNorm(Stream& stream, DeviceSpan x, const DeviceWeight& w, const DeviceWeight& b,
                 float eps, int rows, int dim, DeviceSpan y) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t n = int64_t{rows} * dim;
    CheckOneType({x, y});
    const Activations xa = ActivationsOf(x, n);
    const float* bias = b.present() ? Vector(b, dim, 1, s) : nullptr;
    STRATA_CUDA_CHECK(cuda_ops::LayerNorm(xa.type, xa.data, Vector(w, dim, 0, s), bias, eps, rows,
                                          dim, ActivationsOf(y, n).data, s));
  }

  void RmsNorm(Stream& stream, DeviceSpan x, const DeviceWeight& w, float eps, int rows, int dim,
               DeviceSpan y) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t n = int64_t{rows} * dim;
    CheckOneType({x, y});
    const Activations xa = ActivationsOf(x, n);
    STRATA_CUDA_CHECK(cuda_ops::RmsNorm(xa.type, xa.data, Vector(w, dim, 0, s), eps, rows, dim,
                                        ActivationsOf(y, n).data, s));
  }

  void Activate(Stream& stream, ActivationKind kind, DeviceSpan x) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t n = x.elements();
    const Activations xa = ActivationsOf(x, n);
    if (kind == ActivationKind::kRelu) {
      STRATA_CUDA_CHECK(cuda_ops::Relu(xa.type, xa.data, n, s));
    } else {
      STRATA_CUDA_CHECK(cuda_ops::Gelu(xa.type, xa.data, n, s));
    }
  }

  void SiluMul(Stream& stream, DeviceSpan gate, DeviceSpan up) override {
    const int64_t n = gate.elements();
    CheckOneType({gate, up});
    const Activations g = ActivationsOf(gate, n);
    STRATA_CUDA_CHECK(
        cuda_ops::SiluMul(g.type, g.data, ActivationsOf(up, n).data, n, CudaStreamOf(stream)));
  }

  void Rope(Stream& stream, DeviceSpan x, std::span<const int32_t> positions, int heads,
            int head_dim, std::span<const float> inv_freq) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int tokens = static_cast<int>(positions.size());
    STRATA_CHECK(inv_freq.size() == static_cast<size_t>(head_dim / 2));
    const Activations xa = ActivationsOf(x, int64_t{tokens} * heads * head_dim);
    STRATA_CUDA_CHECK(cuda_ops::ApplyRope(xa.type, xa.data, Stage(positions, 0, s), tokens, heads,
                                          head_dim, Stage(inv_freq, 1, s), s));
  }

  void Add(Stream& stream, DeviceSpan x, DeviceSpan y) override {
    const int64_t n = x.elements();
    CheckOneType({x, y});
    const Activations xa = ActivationsOf(x, n);
    STRATA_CUDA_CHECK(
        cuda_ops::Add(xa.type, xa.data, ActivationsOf(y, n).data, n, CudaStreamOf(stream)));
  }

  void ExpandWeightQ4(Stream& stream, DeviceSpan codes, DeviceSpan params, int64_t rows,
                      int64_t cols, int group, DeviceSpan out) override {
    STRATA_CHECK(codes.bytes() == static_cast<uint64_t>(WeightQ4CodeBytes(rows, cols)) &&
                 params.bytes() ==
                     static_cast<uint64_t>(WeightQ4ParamHalves(rows, cols, group)) * 2);
    const Activations o = ActivationsOf(out, rows * cols);
    STRATA_CUDA_CHECK(cuda_ops::ExpandWeightQ4(static_cast<const uint8_t*>(CudaAddress(codes)),
                                               static_cast<const __half*>(CudaAddress(params)),
                                               rows, static_cast<int>(cols), group, o.type, o.data,
                                               CudaStreamOf(stream)));
  }

  void Attention(Stream& stream, const AttentionShape& shape, DeviceSpan q, DeviceSpan k,
                 DeviceSpan v, std::span<const int> start, DeviceSpan out) override {
    const cudaStream_t cs = CudaStreamOf(stream);
    STRATA_CHECK(static_cast<int>(start.size()) == shape.batch);
    const int64_t queries = int64_t{shape.batch} * shape.new_tokens * shape.num_heads *
                            shape.head_dim;
    const int64_t cache = int64_t{shape.batch} * shape.num_kv_heads * shape.max_len *
                          shape.head_dim;
    kernels::cuda::CausalAttentionShape s;
    s.batch = shape.batch;
    s.new_tokens = shape.new_tokens;
    s.num_heads = shape.num_heads;
    s.num_kv_heads = shape.num_kv_heads;
    s.head_dim = shape.head_dim;
    s.max_len = shape.max_len;
    s.cache_len = shape.cache_len;
    s.scale = shape.scale;
    CheckOneType({q, k, v, out});
    const Activations qa = ActivationsOf(q, queries), ka = ActivationsOf(k, cache);
    const Activations va = ActivationsOf(v, cache), oa = ActivationsOf(out, queries);
    const int* start_d = Stage(start, 0, cs);
    switch (qa.type) {
      case ElemType::kF32:
        STRATA_CUDA_CHECK(cuda_ops::CausalAttention(
            s, static_cast<const float*>(qa.data), static_cast<const float*>(ka.data),
            static_cast<const float*>(va.data), start_d, static_cast<float*>(oa.data), cs));
        break;
      case ElemType::kF16:
        AttendF16(s, q, static_cast<const __half*>(ka.data), static_cast<const __half*>(va.data),
                  start_d, out, cs);
        break;
      case ElemType::kBF16:
        STRATA_CUDA_CHECK(cuda_ops::CausalAttention(
            s, static_cast<const __nv_bfloat16*>(qa.data),
            static_cast<const __nv_bfloat16*>(ka.data), static_cast<const __nv_bfloat16*>(va.data),
            start_d, static_cast<__nv_bfloat16*>(oa.data), cs));
        break;
    }
  }

  void WriteKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan v_new,
                 std::span<const int> start, std::span<const KvQ4Row> rows,
                 int row_begin) override {
    const cudaStream_t s = CudaStreamOf(stream);
    CheckKvQ4Step(step, start, rows.size(), row_begin);
    CheckOneType({k_new, v_new});
    const int64_t n = StepKvFloats(step);
    const float* k = WideFloats(k_new, n, CudaScratchBuffer::kWideActivations0, true, s);
    const float* v = WideFloats(v_new, n, CudaScratchBuffer::kWideActivations1, true, s);
    WriteKvQ4Floats(step, k, v, start, rows, row_begin, s);
  }

  void AttendKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan q_span,
                  std::span<const int> start, std::span<const KvQ4Row> rows, int row_begin,
                  DeviceSpan out_span) override {
    const cudaStream_t s = CudaStreamOf(stream);
    CheckKvQ4Step(step, start, rows.size(), row_begin);
    STRATA_CHECK(step.tokens == 1);
    CheckOneType({q_span, out_span});
    // The heads the rows do not serve go to fp32 and back unchanged (a half widens exactly).
    const int64_t queries = int64_t{step.batch} * step.num_heads * step.head_dim;
    const float* q = WideFloats(q_span, queries, CudaScratchBuffer::kWideActivations0, true, s);
    float* out = WideFloats(out_span, queries, CudaScratchBuffer::kWideActivations1, true, s);
    AttendKvQ4Floats(step, q, start, rows, row_begin, out, s);
    StoreWideFloats(out, out_span, queries, s);
  }

  void FitKeySmoothing(Stream& stream, const KvQ4Step& step, DeviceSpan k_new,
                       std::span<const int> start, DeviceSpan mean, DeviceSpan scale) override {
    const cudaStream_t s = CudaStreamOf(stream);
    STRATA_CHECK(static_cast<int>(start.size()) == step.batch && step.tokens >= 0 &&
                 step.cache_len >= step.tokens);
    const int64_t n = SmoothingFloats(step);
    const float* k =
        WideFloats(k_new, StepKvFloats(step), CudaScratchBuffer::kWideActivations0, true, s);
    STRATA_CUDA_CHECK(cuda_ops::FitKeySmoothing(
        step.batch, step.num_kv_heads, step.head_dim, step.tokens, step.cache_len - step.tokens,
        Stage(start, 0, s), k, Floats(mean, n), Floats(scale, n), s));
  }

  void SmoothKeys(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan mean,
                  DeviceSpan scale) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t n = SmoothingFloats(step);
    const int64_t keys = StepKvFloats(step);
    float* k = WideFloats(k_new, keys, CudaScratchBuffer::kWideActivations0, true, s);
    STRATA_CUDA_CHECK(cuda_ops::SmoothKeys(step.batch, step.tokens, step.num_kv_heads,
                                           step.head_dim, Floats(mean, n), Floats(scale, n), k, s));
    StoreWideFloats(k, k_new, keys, s);
  }

  void ScaleQueries(Stream& stream, const KvQ4Step& step, DeviceSpan q, DeviceSpan scale) override {
    STRATA_CHECK(step.num_kv_heads > 0 && step.num_heads % step.num_kv_heads == 0);
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t queries = int64_t{step.batch} * step.num_heads * step.head_dim;
    float* qd = WideFloats(q, queries, CudaScratchBuffer::kWideActivations0, true, s);
    STRATA_CUDA_CHECK(cuda_ops::ScaleQueries(step.batch, step.num_heads, step.num_kv_heads,
                                             step.head_dim, Floats(scale, SmoothingFloats(step)),
                                             qd, s));
    StoreWideFloats(qd, q, queries, s);
  }

  void SampleTokens(Stream& stream, DeviceSpan logits_span, int vocab, int limit,
                    std::span<const SamplingSpec> specs, std::span<int32_t> out) override {
    const cudaStream_t s = CudaStreamOf(stream);
    STRATA_CHECK(limit >= 1 && limit <= vocab && out.size() == specs.size());
    const int rows = static_cast<int>(specs.size());
    const float* logits = Floats(logits_span, int64_t{rows} * vocab);
    std::vector<kernels::cuda::SamplingParams> params(specs.size());
    bool any_sampling = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      const SamplingSpec& spec = specs[i];
      params[i].temperature = spec.temperature;
      params[i].top_p = spec.top_p;
      params[i].top_k = spec.top_k;
      params[i].seed = spec.seed;
      params[i].step = spec.step;
      any_sampling = any_sampling || !Greedy(spec);
    }
    if (limit < vocab && rows > 0) {
      // The sampler takes contiguous rows: the first `limit` logits of each, packed.
      const size_t row_bytes = sizeof(float) * static_cast<size_t>(limit);
      float* limited =
          Buffer(CudaScratchBuffer::kLimitedLogits).As<float>(row_bytes * specs.size());
      STRATA_CUDA_CHECK(cudaMemcpy2DAsync(limited, row_bytes, logits,
                                          sizeof(float) * static_cast<size_t>(vocab), row_bytes,
                                          specs.size(), cudaMemcpyDeviceToDevice, s));
      logits = limited;
    }
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    if (any_sampling) {
      STRATA_CUDA_CHECK(cuda_ops::SampleTokensWorkspaceBytes(rows, limit, &workspace_bytes));
      workspace = Buffer(CudaScratchBuffer::kSamplingWorkspace).Get(workspace_bytes);
    }
    int32_t* results = Buffer(CudaScratchBuffer::kResults).As<int32_t>(out.size_bytes());
    STRATA_CUDA_CHECK(cuda_ops::SampleTokens(
        logits, rows, limit, Stage(std::span<const kernels::cuda::SamplingParams>(params), 0, s),
        any_sampling, workspace, workspace_bytes, results, s));
    CopyResults(out, results, s);
  }

  void ScoreTokens(Stream& stream, DeviceSpan logits, int vocab, std::span<const int32_t> tokens,
                   std::span<double> out) override {
    const cudaStream_t s = CudaStreamOf(stream);
    STRATA_CHECK(out.size() == tokens.size());
    for (const int32_t t : tokens) STRATA_CHECK(t >= 0 && t < vocab);
    const int rows = static_cast<int>(tokens.size());
    double* results = Buffer(CudaScratchBuffer::kResults).As<double>(out.size_bytes());
    STRATA_CUDA_CHECK(cuda_ops::LogProbability(Floats(logits, int64_t{rows} * vocab), rows, vocab,
                                               Stage(tokens, 0, s), results, s));
    CopyResults(out, results, s);
  }

 private:
  // WriteKvQ4 on fp32 k, v [batch * tokens, num_kv_heads * head_dim], its step checked.
  void WriteKvQ4Floats(const KvQ4Step& step, const float* k, const float* v,
                       std::span<const int> start, std::span<const KvQ4Row> rows, int row_begin,
                       cudaStream_t s) {
    const KvQ4Format& f = step.format;
    const int d = step.head_dim;
    const int kvh = step.num_kv_heads;
    const int tokens = step.tokens;
    const int first_slot = step.cache_len - tokens;
    const std::vector<Q4ChannelRow> table = RowTable(step, rows);
    // A row's keys and values when it is written alone.
    const size_t head_floats = static_cast<size_t>(tokens) * d;
    float* k_head = Buffer(CudaScratchBuffer::kKvHeadRows).As<float>(KvHeadRowsBytes(tokens, d));
    float* v_head = k_head + head_floats;
    if (!f.keys_by_channel) {
      // Per-token keys: one contiguous cache of one row at a time.
      for (size_t i = 0; i < rows.size(); ++i) {
        const int r = row_begin + static_cast<int>(i);
        GatherHead(step, k, r / kvh, r % kvh, k_head, s);
        GatherHead(step, v, r / kvh, r % kvh, v_head, s);
        const Q4ChannelRow& row = table[i];
        const kernels::cuda::Q4CacheShape shape{1, 1, row.stride, d};
        STRATA_CUDA_CHECK(cuda_ops::WriteQ4Cache(shape, k_head, tokens, first_slot,
                                                 f.rotate_keys, row.k_codes,
                                                 reinterpret_cast<__half*>(row.k_params), s));
        STRATA_CUDA_CHECK(cuda_ops::WriteQ4Cache(shape, v_head, tokens, first_slot, false,
                                                 row.v_codes,
                                                 reinterpret_cast<__half*>(row.v_params), s));
      }
      return;
    }
    const int* start_d = Stage(start, 0, s);
    Q4ChannelRow* table_d = Stage(std::span<const Q4ChannelRow>(table), 1, s);
    for (const RowRun& run : RowRuns(kvh, row_begin, static_cast<int>(rows.size()))) {
      const float* k_run = k + int64_t{run.b} * tokens * kvh * d;
      const float* v_run = v + int64_t{run.b} * tokens * kvh * d;
      int heads = kvh;
      if (run.head >= 0) {
        GatherHead(step, k, run.b, run.head, k_head, s);
        GatherHead(step, v, run.b, run.head, v_head, s);
        k_run = k_head;
        v_run = v_head;
        heads = 1;
      }
      Q4ChannelRow* t = table_d + run.index;
      const int* st = start_d + run.b;
      // Key groups first: they read the exact rows as they were before this write.
      STRATA_CUDA_CHECK(cuda_ops::WriteKeyGroupsQ4Channel(run.batch, heads, d, f.sink, f.window, st,
                                                          first_slot, tokens, k_run, t, s));
      STRATA_CUDA_CHECK(cuda_ops::WriteExactRowsQ4Channel(run.batch, heads, d, f.sink, f.window,
                                                          k_run, v_run, tokens, first_slot, st,
                                                          /*rotate_keys=*/false, t, s));
      STRATA_CUDA_CHECK(
          cuda_ops::WriteValueRowsQ4Channel(run.batch, heads, d, v_run, tokens, first_slot, t, s));
    }
  }

  // AttendKvQ4 of fp32 q into fp32 out [batch, num_heads, head_dim], its step checked.
  void AttendKvQ4Floats(const KvQ4Step& step, const float* q, std::span<const int> start,
                        std::span<const KvQ4Row> rows, int row_begin, float* out, cudaStream_t s) {
    const KvQ4Format& f = step.format;
    const int d = step.head_dim;
    const int kvh = step.num_kv_heads;
    const int group = step.num_heads / kvh;
    const std::vector<Q4ChannelRow> table = RowTable(step, rows);
    const int* start_d = Stage(start, 0, s);
    // Planned for this step's length (cache_len <= every row's stride, checked): each (sequence,
    // KV head) reads its own row, so the rows' strides play no part.
    if (!f.keys_by_channel) {
      kernels::cuda::DecodeAttentionShape shape;
      shape.batch = 1;
      shape.num_heads = group;
      shape.num_kv_heads = 1;
      shape.head_dim = d;
      shape.max_len = step.cache_len;
      shape.cache_len = step.cache_len;
      shape.scale = step.scale;
      shape.keys_rotated = f.rotate_keys;
      kernels::cuda::DecodeAttentionPlan plan;
      STRATA_CUDA_CHECK(
          cuda_ops::PlanDecodeAttention(shape, kernels::cuda::DecodeCacheKind::kQ4, &plan));
      void* workspace = Workspace(plan.workspace_bytes);
      for (size_t i = 0; i < rows.size(); ++i) {
        const int r = row_begin + static_cast<int>(i);
        const int64_t at = (int64_t{r / kvh} * step.num_heads + (r % kvh) * group) * d;
        const Q4ChannelRow& row = table[i];
        STRATA_CUDA_CHECK(cuda_ops::DecodeAttentionQ4(
            shape, q + at, row.k_codes, reinterpret_cast<const __half*>(row.k_params), row.v_codes,
            reinterpret_cast<const __half*>(row.v_params), start_d + r / kvh, plan, workspace,
            out + at, s));
      }
      return;
    }
    Q4ChannelRow* table_d = Stage(std::span<const Q4ChannelRow>(table), 1, s);
    for (const RowRun& run : RowRuns(kvh, row_begin, static_cast<int>(rows.size()))) {
      const int heads = run.head >= 0 ? 1 : kvh;
      kernels::cuda::Q4ChannelDecodeShape shape;
      shape.batch = run.batch;
      shape.num_heads = heads * group;
      shape.num_kv_heads = heads;
      shape.head_dim = d;
      shape.max_len = step.cache_len;
      shape.cache_len = step.cache_len;
      shape.sink = f.sink;
      shape.window = f.window;
      shape.scale = step.scale;
      kernels::cuda::Q4ChannelDecodePlan plan;
      STRATA_CUDA_CHECK(cuda_ops::PlanDecodeAttentionQ4Channel(shape, &plan));
      const int64_t at = (int64_t{run.b} * step.num_heads + std::max(run.head, 0) * group) * d;
      STRATA_CUDA_CHECK(
          cuda_ops::DecodeAttentionQ4Channel(shape, q + at, table_d + run.index, start_d + run.b,
                                             plan, Workspace(plan.workspace_bytes), out + at, s));
    }
  }

  // Floats of a step's smoothing mean or scale: [batch, num_kv_heads, head_dim].
  static int64_t SmoothingFloats(const KvQ4Step& step) {
    return int64_t{step.batch} * step.num_kv_heads * step.head_dim;
  }

  static std::vector<Q4ChannelRow> RowTable(const KvQ4Step& step, std::span<const KvQ4Row> rows) {
    std::vector<Q4ChannelRow> table;
    table.reserve(rows.size());
    for (const KvQ4Row& row : rows) table.push_back(RowAddresses(step, row));
    return table;
  }

  // Decode attention's workspace of `bytes` (null for none).
  void* Workspace(size_t bytes) { return Buffer(CudaScratchBuffer::kDecodeWorkspace).Get(bytes); }

  // The `n` elements of activation span `span` as fp32: the span itself when it is fp32, else
  // scratch buffer `wide`, holding them widened (queued on `s`) when `read`.
  float* WideFloats(const DeviceSpan& span, int64_t n, CudaScratchBuffer wide, bool read,
                    cudaStream_t s) {
    const Activations a = ActivationsOf(span, n);
    if (a.type == ElemType::kF32) return static_cast<float*>(a.data);
    float* floats = Buffer(wide).As<float>(sizeof(float) * static_cast<size_t>(n));
    if (read) STRATA_CUDA_CHECK(cuda_ops::Convert(a.data, a.type, n, ElemType::kF32, floats, s));
    return floats;
  }

  // Stores `floats`, from WideFloats(span, n, ...), into `span` rounded to its type; nothing to do
  // when the span is fp32 (WideFloats gave the span itself).
  static void StoreWideFloats(const float* floats, const DeviceSpan& span, int64_t n,
                              cudaStream_t s) {
    const Activations a = ActivationsOf(span, n);
    if (a.type == ElemType::kF32) return;
    STRATA_CUDA_CHECK(cuda_ops::Convert(floats, ElemType::kF32, n, a.type, a.data, s));
  }

  // Attention over fp16 q, k, v, out: a decode step on the flash-decoding kernel where it runs
  // the shape (DecodesOnF16Kernel), through fp32 q and out; else the tensor-core prefill kernel
  // where it plans the shape (sm_80 and up); else the causal attention kernel, which takes any.
  void AttendF16(const kernels::cuda::CausalAttentionShape& shape, DeviceSpan q_span,
                 const __half* k, const __half* v, const int* start, DeviceSpan out_span,
                 cudaStream_t s) {
    const int64_t queries =
        int64_t{shape.batch} * shape.new_tokens * shape.num_heads * shape.head_dim;
    const auto* q = static_cast<const __half*>(ActivationsOf(q_span, queries).data);
    auto* out = static_cast<__half*>(ActivationsOf(out_span, queries).data);
    if (shape.new_tokens == 1 && DecodesOnF16Kernel(SpanType::kF16, shape.head_dim) &&
        AlignedTo(k, 16) && AlignedTo(v, 16)) {
      kernels::cuda::DecodeAttentionShape d;
      d.batch = shape.batch;
      d.num_heads = shape.num_heads;
      d.num_kv_heads = shape.num_kv_heads;
      d.head_dim = shape.head_dim;
      d.max_len = shape.max_len;
      d.cache_len = shape.cache_len;
      d.scale = shape.scale;
      // Planned for this step's length, so that the splits stay within the reservation (which
      // bounds cache_len, not the cache's stride); the kernel splits the slots it attends.
      kernels::cuda::DecodeAttentionShape planned = d;
      planned.max_len = d.cache_len;
      kernels::cuda::DecodeAttentionPlan plan;
      STRATA_CUDA_CHECK(
          cuda_ops::PlanDecodeAttention(planned, kernels::cuda::DecodeCacheKind::kF16, &plan));
      const float* q_floats =
          WideFloats(q_span, queries, CudaScratchBuffer::kWideActivations0, true, s);
      float* out_floats =
          WideFloats(out_span, queries, CudaScratchBuffer::kWideActivations1, false, s);
      STRATA_CUDA_CHECK(cuda_ops::DecodeAttentionF16(
          d, q_floats, k, v, start, plan, Workspace(plan.workspace_bytes), out_floats, s));
      StoreWideFloats(out_floats, out_span, queries, s);
      return;
    }
    kernels::cuda::PrefillAttentionPlan plan;
    if (cuda_ops::PlanPrefillAttention(shape, &plan) == cudaSuccess && AlignedTo(q, 16) &&
        AlignedTo(k, 16) && AlignedTo(v, 16) && AlignedTo(out, 16)) {
      STRATA_CUDA_CHECK(cuda_ops::PrefillAttentionF16(shape, plan, q, k, v, start, out, s));
      return;
    }
    STRATA_CUDA_CHECK(cuda_ops::CausalAttention(shape, q, k, v, start, out, s));
  }

  ScratchBuffer& Buffer(CudaScratchBuffer b) { return buffers_[static_cast<int>(b)]; }

  // The scratch of ReserveScratch(limits): the sampler's planner is a CUDA call (CUB sizes its
  // own storage), the rest plain arithmetic (cuda_scratch.h).
  CudaScratchLayout ScratchLayout(const OpLimits& limits) const {
    size_t sampling_bytes = 0;
    if (limits.batch > 0 && limits.vocab > 0) {
      STRATA_CHECK_MSG(int64_t{limits.batch} * limits.vocab < INT32_MAX,
                       "the sampler takes fewer than 2^31 logits at once");
      STRATA_CUDA_CHECK(
          cuda_ops::SampleTokensWorkspaceBytes(limits.batch, limits.vocab, &sampling_bytes));
    }
    return CudaScratchLayoutFor(limits, options_.fp32_gemm, sampling_bytes);
  }

  void LookUp(Stream& stream, const DeviceWeight& table, std::span<const int32_t> ids,
              bool accumulate, DeviceSpan out) {
    const cudaStream_t s = CudaStreamOf(stream);
    for (const int32_t id : ids) STRATA_CHECK(id >= 0 && id < table.rows);
    const DeviceTensor td = Elements(table);
    const int n = static_cast<int>(ids.size());
    const Activations o = ActivationsOf(out, n * table.cols);
    STRATA_CUDA_CHECK(cuda_ops::Embed(td.data, td.type, table.cols, Stage(ids, 0, s), n, accumulate,
                                      o.type, o.data, s));
  }

  // A device copy of `host` in staging slot `slot`, queued on `s`. The source is pageable memory
  // (cuda_backend.h), whose copy returns once the source is staged: the caller's array may go as
  // soon as the op returns.
  template <typename T>
  T* Stage(std::span<const T> host, int slot, cudaStream_t s) {
    T* staged = Buffer(slot == 0 ? CudaScratchBuffer::kStaging0 : CudaScratchBuffer::kStaging1)
                    .As<T>(host.size_bytes());
    if (!host.empty()) {
      STRATA_CUDA_CHECK(cudaMemcpyAsync(staged, host.data(), host.size_bytes(),
                                        cudaMemcpyHostToDevice, s));
    }
    return staged;
  }

  // The first out.size() elements of `results` (device) copied to the caller's `out`, queued on
  // `s`. Into pageable memory the copy returns only once the stream has reached it and it is done.
  template <typename T>
  void CopyResults(std::span<T> out, const T* results, cudaStream_t s) {
    if (!out.empty()) {
      STRATA_CUDA_CHECK(
          cudaMemcpyAsync(out.data(), results, out.size_bytes(), cudaMemcpyDeviceToHost, s));
    }
  }

  // The `n` elements of `t` widened to fp32 into `scratch`, on `s`.
  static const float* Widen(const DeviceTensor& t, int64_t n, ScratchBuffer& scratch,
                            cudaStream_t s) {
    float* wide = scratch.As<float>(sizeof(float) * static_cast<size_t>(n));
    STRATA_CUDA_CHECK(cuda_ops::Convert(t.data, t.type, n, ElemType::kF32, wide, s));
    return wide;
  }

  // y = x w^T (+ bias), then ReLU when relu: the GEMM on ChooseGemm's path; the tensor-core ones
  // on cuBLASLt with the bias and the ReLU in its epilogue (rounded once), the fp32 ones, and any
  // shape cuBLASLt has no algorithm for, on cublasGemmEx with kernels after it.
  void RunLinear(Stream& stream, DeviceSpan x_span, int m, const DeviceWeight& w,
                 const DeviceWeight& bias, DeviceSpan y_span, bool relu) {
    const cudaStream_t s = CudaStreamOf(stream);
    const int out = static_cast<int>(w.rows);
    const int in = static_cast<int>(w.cols);
    const Activations x = ActivationsOf(x_span, int64_t{m} * in);
    const Activations y = ActivationsOf(y_span, int64_t{m} * out);
    STRATA_CHECK_MSG(y.type == x.type || y.type == ElemType::kF32,
                     "Linear's y is neither of x's type nor fp32");
    DeviceTensor wd = Elements(w);
    const GemmChoice gemm =
        ChooseGemm(x_span.type(), w.data.type(), options_.fp32_gemm, m, in, out);
    const void* a = x.data;
    switch (gemm.path) {
      case GemmPath::kFp32:
      case GemmPath::kHalf:
        break;
      case GemmPath::kWidenedFp32:
        wd = {Widen(wd, w.numel(), Buffer(CudaScratchBuffer::kWidenedMatrix), s), ElemType::kF32};
        break;
      case GemmPath::kHalfTensorCore: {
        void* rounded = Buffer(CudaScratchBuffer::kRoundedX).Get(gemm.rounded_x_bytes);
        STRATA_CUDA_CHECK(
            cuda_ops::Convert(x.data, ElemType::kF32, int64_t{m} * in, wd.type, rounded, s));
        a = rounded;
        break;
      }
      case GemmPath::kRoundedWeight: {
        void* rounded = Buffer(CudaScratchBuffer::kRoundedWeight).Get(gemm.rounded_weight_bytes);
        STRATA_CUDA_CHECK(cuda_ops::Convert(wd.data, wd.type, w.numel(), x.type, rounded, s));
        wd = {rounded, x.type};
        break;
      }
    }
    void* workspace = Buffer(CudaScratchBuffer::kCublasWorkspace).Get(kCublasWorkspaceBytes);
    if (RunsOnLt(gemm.path) && m > 0 && out > 0 && in > 0) {
      const GemmOperands operands{a, wd.data,
                                  bias.present() ? BiasOfType(bias, out, y.type, s) : nullptr,
                                  y.data};
      const LtGemmKey key = LtGemmKeyOf(m, out, in, SpanTypeOfElem(wd.type), y_span.type(), relu,
                                        operands);
      if (lt_.Run(key, operands, workspace, kCublasWorkspaceBytes, s)) return;
    }
    blas_.SetStream(s, workspace, kCublasWorkspaceBytes);
    if (y.type == ElemType::kF32) {
      GemmNT(blas_, m, out, in, wd.type, a, wd.data, static_cast<float*>(y.data), out, false);
    } else {
      GemmNTHalfOut(blas_, m, out, in, wd.type, a, wd.data, y.data, out);
    }
    if (bias.present()) {
      STRATA_CUDA_CHECK(cuda_ops::AddBias(y.type, y.data, Vector(bias, out, 0, s), m, out, s));
    }
    if (relu) STRATA_CUDA_CHECK(cuda_ops::Relu(y.type, y.data, int64_t{m} * out, s));
  }

  // The n values of a bias in `type`, as cuBLASLt's epilogue reads it (of y's type): the weight
  // itself when it is of that type, else widened (fp32) or rounded (kLinearBias) on stream s.
  const void* BiasOfType(const DeviceWeight& bias, int64_t n, ElemType type, cudaStream_t s) {
    STRATA_CHECK(bias.numel() == n);
    const DeviceTensor t = Elements(bias);
    if (t.type == type) return t.data;
    if (type == ElemType::kF32) return Vector(bias, n, 0, s);
    void* rounded = Buffer(CudaScratchBuffer::kLinearBias).Get(n * sizeof(uint16_t));
    STRATA_CUDA_CHECK(cuda_ops::Convert(t.data, t.type, n, type, rounded, s));
    return rounded;
  }

  // A vector weight of `n` elements as fp32: in place when it is F32, else widened into scratch
  // slot `slot` (two, so that a weight and a bias can be live at once).
  const float* Vector(const DeviceWeight& v, int64_t n, int slot, cudaStream_t s) {
    STRATA_CHECK(v.numel() == n);
    const DeviceTensor t = Elements(v);
    if (t.type == ElemType::kF32) return static_cast<const float*>(t.data);
    return Widen(t, n,
                 Buffer(slot == 0 ? CudaScratchBuffer::kWidenedVector0
                                  : CudaScratchBuffer::kWidenedVector1),
                 s);
  }

  static std::array<ScratchBuffer, kCudaScratchBuffers> NamedBuffers() {
    return []<size_t... i>(std::index_sequence<i...>) {
      return std::array<ScratchBuffer, kCudaScratchBuffers>{
          ScratchBuffer(CudaScratchBufferName(static_cast<CudaScratchBuffer>(i)))...};
    }(std::make_index_sequence<kCudaScratchBuffers>());
  }

  CudaBackendOptions options_;
  CublasHandle blas_;  // set to each Linear's stream, with the kCublasWorkspace buffer
  LtGemm lt_;          // the tensor-core Linears' GEMMs, with that buffer as their workspace
  // The scratch buffers (cuda_scratch.h), pieces of scratch_ once ReserveScratch has run, else
  // grown on demand (growing frees the old buffer, which waits for the device, so no queued op
  // still reads it).
  std::array<ScratchBuffer, kCudaScratchBuffers> buffers_ = NamedBuffers();
  DeviceBuffer scratch_;  // ReserveScratch's one allocation
};

}  // namespace

std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions& options, std::string* why_not) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count == 0) e = cudaErrorNoDevice;
  if (e == cudaSuccess && (options.device < 0 || options.device >= count)) {
    if (why_not != nullptr) {
      *why_not = "CUDA device " + std::to_string(options.device) + " does not exist (" +
                 std::to_string(count) + " present)";
    }
    return nullptr;
  }
  if (e == cudaSuccess) e = cudaSetDevice(options.device);
  if (e != cudaSuccess) {
    if (why_not != nullptr) *why_not = CudaErrorStatus(CudaOperation::kFindDevice, e).message();
    return nullptr;
  }
  return std::make_unique<CudaBackend>(options);
}

}  // namespace strata
