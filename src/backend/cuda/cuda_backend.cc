// CudaBackend: Backend ops as kernel launches and cuBLAS calls on the caller's streams, over spans
// of the backend's arenas (see cuda_backend.h for the memory contract).
#include "src/backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <span>

#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/backend/cuda/cuda_memory.h"
#include "src/backend/cuda/cuda_resources.h"
#include "src/backend/cuda/gemm.h"
#include "src/backend/cuda/ops.h"
#include "src/backend/q4_sizes.h"
#include "src/core/check.h"

namespace strata {
namespace {

using kernels::cuda::ElemType;

// The fp32 elements of an activation span of `n` elements.
float* Floats(const DeviceSpan& span, int64_t n) {
  STRATA_CHECK_MSG(span.type() == SpanType::kF32, "an activation span is not fp32");
  STRATA_CHECK(span.bytes() == static_cast<uint64_t>(n) * sizeof(float));
  return static_cast<float*>(CudaAddress(span));
}

// The elements an activation span holds (Floats then checks that no bytes are left over).
int64_t FloatCount(const DeviceSpan& span) {
  return static_cast<int64_t>(span.bytes() / sizeof(float));
}

// A weight as the kernels see it: device data of one element type.
struct DeviceTensor {
  const void* data = nullptr;
  ElemType type = ElemType::kF32;
};

// The elements of a present weight. REQUIRES (checked): an F32, F16 or BF16 span of exactly
// rows x cols elements.
DeviceTensor Elements(const DeviceWeight& w) {
  const SpanType type = w.data.type();
  STRATA_CHECK_MSG(type == SpanType::kF32 || type == SpanType::kF16 || type == SpanType::kBF16,
                   "a weight is not F32, F16 or BF16");
  const uint64_t element_bytes = type == SpanType::kF32 ? 4 : 2;
  STRATA_CHECK(w.rows >= 0 && w.cols >= 0 &&
               w.data.bytes() == static_cast<uint64_t>(w.numel()) * element_bytes);
  return {CudaAddress(w.data), type == SpanType::kF32   ? ElemType::kF32
                               : type == SpanType::kF16 ? ElemType::kF16
                                                        : ElemType::kBF16};
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options)
      : options_(options), blas_(/*stream=*/nullptr) {}

  const char* name() const override { return "cuda"; }

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

  void Linear(Stream& stream, DeviceSpan x_span, int m, const DeviceWeight& w,
              const DeviceWeight& bias, DeviceSpan y_span) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int out = static_cast<int>(w.rows);
    const int in = static_cast<int>(w.cols);
    const float* x = Floats(x_span, int64_t{m} * in);
    float* y = Floats(y_span, int64_t{m} * out);
    DeviceTensor wd = Elements(w);
    if (options_.fp32_gemm && wd.type != ElemType::kF32) {
      wd = {Widen(wd, w.numel(), widened_matrix_, s), ElemType::kF32};
    }
    const void* a = x;
    if (wd.type != ElemType::kF32) {
      const int64_t n = int64_t{m} * in;
      rounded_x_.Reserve(sizeof(uint16_t) * static_cast<size_t>(n));
      STRATA_CUDA_CHECK(cuda_ops::FloatToHalf(x, n, wd.type, rounded_x_.as<uint16_t>(), s));
      a = rounded_x_.get();
    }
    blas_.SetStream(s);
    GemmNT(blas_, m, out, in, wd.type, a, wd.data, y, out, false);
    if (bias.present()) {
      STRATA_CUDA_CHECK(cuda_ops::AddBias(y, Vector(bias, out, 0, s), m, out, s));
    }
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
    const float* bias = b.present() ? Vector(b, dim, 1, s) : nullptr;
    STRATA_CUDA_CHECK(cuda_ops::LayerNorm(Floats(x, n), Vector(w, dim, 0, s), bias, eps, rows,
                                          dim, Floats(y, n), s));
  }

  void RmsNorm(Stream& stream, DeviceSpan x, const DeviceWeight& w, float eps, int rows, int dim,
               DeviceSpan y) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t n = int64_t{rows} * dim;
    STRATA_CUDA_CHECK(
        cuda_ops::RmsNorm(Floats(x, n), Vector(w, dim, 0, s), eps, rows, dim, Floats(y, n), s));
  }

  void Activate(Stream& stream, ActivationKind kind, DeviceSpan x) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int64_t n = FloatCount(x);
    if (kind == ActivationKind::kRelu) {
      STRATA_CUDA_CHECK(cuda_ops::Relu(Floats(x, n), n, s));
    } else {
      STRATA_CUDA_CHECK(cuda_ops::Gelu(Floats(x, n), n, s));
    }
  }

  void SiluMul(Stream& stream, DeviceSpan gate, DeviceSpan up) override {
    const int64_t n = FloatCount(gate);
    STRATA_CUDA_CHECK(
        cuda_ops::SiluMul(Floats(gate, n), Floats(up, n), n, CudaStreamOf(stream)));
  }

  void Rope(Stream& stream, DeviceSpan x, std::span<const int32_t> positions, int heads,
            int head_dim, std::span<const float> inv_freq) override {
    const cudaStream_t s = CudaStreamOf(stream);
    const int tokens = static_cast<int>(positions.size());
    STRATA_CHECK(inv_freq.size() == static_cast<size_t>(head_dim / 2));
    float* xd = Floats(x, int64_t{tokens} * heads * head_dim);
    STRATA_CUDA_CHECK(cuda_ops::ApplyRope(xd, Stage(positions, 0, s), tokens, heads, head_dim,
                                          Stage(inv_freq, 1, s), s));
  }

  void Add(Stream& stream, DeviceSpan x, DeviceSpan y) override {
    const int64_t n = FloatCount(x);
    STRATA_CUDA_CHECK(cuda_ops::Add(Floats(x, n), Floats(y, n), n, CudaStreamOf(stream)));
  }

  void ExpandWeightQ4(Stream& stream, DeviceSpan codes, DeviceSpan params, int64_t rows,
                      int64_t cols, int group, DeviceSpan out) override {
    STRATA_CHECK(codes.bytes() == static_cast<uint64_t>(WeightQ4CodeBytes(rows, cols)) &&
                 params.bytes() ==
                     static_cast<uint64_t>(WeightQ4ParamHalves(rows, cols, group)) * 2);
    STRATA_CUDA_CHECK(cuda_ops::ExpandWeightQ4(
        static_cast<const uint8_t*>(CudaAddress(codes)),
        static_cast<const __half*>(CudaAddress(params)), rows, static_cast<int>(cols), group,
        ElemType::kF32, Floats(out, rows * cols), CudaStreamOf(stream)));
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
    STRATA_CUDA_CHECK(cuda_ops::CausalAttention(s, Floats(q, queries), Floats(k, cache),
                                                Floats(v, cache), Stage(start, 0, cs),
                                                Floats(out, queries), cs));
  }

 private:
  void LookUp(Stream& stream, const DeviceWeight& table, std::span<const int32_t> ids,
              bool accumulate, DeviceSpan out) {
    const cudaStream_t s = CudaStreamOf(stream);
    for (const int32_t id : ids) STRATA_CHECK(id >= 0 && id < table.rows);
    const DeviceTensor td = Elements(table);
    const int n = static_cast<int>(ids.size());
    float* od = Floats(out, n * table.cols);
    STRATA_CUDA_CHECK(cuda_ops::Embed(td.data, td.type, table.cols, Stage(ids, 0, s), n,
                                      accumulate, od, s));
  }

  // A device copy of `host` in staging slot `slot`, queued on `s`. The source is pageable memory
  // (cuda_backend.h), whose copy returns once the source is staged: the caller's array may go as
  // soon as the op returns.
  template <typename T>
  const T* Stage(std::span<const T> host, int slot, cudaStream_t s) {
    DeviceBuffer& buf = staging_[slot];
    buf.Reserve(host.size_bytes());
    if (!host.empty()) {
      STRATA_CUDA_CHECK(cudaMemcpyAsync(buf.get(), host.data(), host.size_bytes(),
                                        cudaMemcpyHostToDevice, s));
    }
    return buf.as<const T>();
  }

  // The `n` elements of `t` widened to fp32 into `scratch`, on `s`.
  static const float* Widen(const DeviceTensor& t, int64_t n, DeviceBuffer& scratch,
                            cudaStream_t s) {
    scratch.Reserve(sizeof(float) * static_cast<size_t>(n));
    STRATA_CUDA_CHECK(cuda_ops::ToFloat(t.data, t.type, n, scratch.as<float>(), s));
    return scratch.as<float>();
  }

  // A vector weight of `n` elements as fp32: in place when it is F32, else widened into scratch
  // slot `slot` (two, so that a weight and a bias can be live at once).
  const float* Vector(const DeviceWeight& v, int64_t n, int slot, cudaStream_t s) {
    STRATA_CHECK(v.numel() == n);
    const DeviceTensor t = Elements(v);
    if (t.type == ElemType::kF32) return static_cast<const float*>(t.data);
    return Widen(t, n, widened_vector_[slot], s);
  }

  CudaBackendOptions options_;
  CublasHandle blas_;  // set to each Linear's stream
  // Scratch, grow-only for now (a later change moves it into the planned arena). Growing frees
  // the old buffer, which waits for the device, so no queued op still reads it.
  DeviceBuffer rounded_x_;          // activations rounded to fp16/bf16 for a GEMM
  DeviceBuffer widened_matrix_;     // a Linear weight widened to fp32 (fp32_gemm)
  DeviceBuffer widened_vector_[2];  // vector weights (norm weights, biases) widened to fp32
  DeviceBuffer staging_[2];         // host arrays copied in, two an op
};

}  // namespace

std::unique_ptr<Backend> MakeCudaBackend(const CudaBackendOptions& options, std::string* why_not) {
  const CudaDeviceInfo info = QueryCudaDevices();
  if (info.device_count == 0 || options.device < 0 || options.device >= info.device_count) {
    if (why_not != nullptr) {
      *why_not = info.device_count == 0
                     ? "no CUDA device (" + (info.error.empty() ? "none found" : info.error) + ")"
                     : "CUDA device " + std::to_string(options.device) + " does not exist (" +
                           std::to_string(info.device_count) + " present)";
    }
    return nullptr;
  }
  STRATA_CUDA_CHECK(cudaSetDevice(options.device));
  return std::make_unique<CudaBackend>(options);
}

}  // namespace strata
