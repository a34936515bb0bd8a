// CudaBackend: Backend ops as kernel launches and cuBLAS calls on one stream, with host weights
// uploaded once into a pointer-keyed cache (see cuda_backend.h for the memory contract).
#include "src/backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/weight_q4.h"
#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/backend/cuda/cuda_memory.h"
#include "src/backend/cuda/cuda_resources.h"
#include "src/backend/cuda/gemm.h"
#include "src/backend/cuda/ops.h"
#include "src/core/check.h"

namespace strata {
namespace {

using kernels::cuda::ElemType;

ElemType ElemTypeOf(DType t) {
  switch (t) {
    case DType::kF32: return ElemType::kF32;
    case DType::kF16: return ElemType::kF16;
    case DType::kBF16: return ElemType::kBF16;
    case DType::kQ4:
      break;  // expanded to fp32 first (ResidentQ4)
  }
  STRATA_CHECK(t != DType::kQ4);
  return ElemType::kF32;
}

// True for memory a kernel can read directly (device or managed); false for host memory,
// registered or not.
bool OnDevice(const void* p) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // clear the error: unknown pointers are plain host memory
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

// A weight as the kernels see it: device data of one element type.
struct DeviceTensor {
  const void* data = nullptr;
  ElemType type = ElemType::kF32;
};

// What an op needs of a weight: its stored element type, or fp32.
enum class Form { kAsStored, kFloat };

struct CacheKey {
  const void* data;
  size_t bytes;
  DType dtype;
  Form form;
  bool operator==(const CacheKey& o) const {
    return data == o.data && bytes == o.bytes && dtype == o.dtype && form == o.form;
  }
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    return std::hash<const void*>()(k.data) ^ (k.bytes * 0x9E3779B97F4A7C15ull) ^
           (static_cast<size_t>(k.dtype) << 1) ^ static_cast<size_t>(k.form);
  }
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options)
      : options_(options), stream_(/*non_blocking=*/false), blas_(stream_.get()) {}

  const char* name() const override { return "cuda"; }

  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    return AllocateCudaDeviceArena(bytes);
  }
  std::unique_ptr<Stream> MakeStream() override { return MakeCudaBackendStream(); }
  std::unique_ptr<Event> MakeEvent() override { return MakeCudaEvent(); }
  Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t> memory) override {
    return PinCudaHostMemory(memory);
  }

  void Linear(const float* x, int m, const TensorView& w, const TensorView& bias,
              float* y) override {
    STRATA_CHECK(w.shape.size() == 2);
    BeginOp();
    const int out = static_cast<int>(w.dim(0));
    const int in = static_cast<int>(w.dim(1));
    const DeviceTensor wd = Resident(w, options_.fp32_gemm ? Form::kFloat : Form::kAsStored);
    const DeviceTensor bd = bias.present() ? Resident(bias, Form::kFloat) : DeviceTensor{};
    const void* a = x;
    if (wd.type != ElemType::kF32) {
      const int64_t n = static_cast<int64_t>(m) * in;
      rounded_x_.Reserve(sizeof(uint16_t) * static_cast<size_t>(n));
      STRATA_CUDA_CHECK(
          cuda_ops::FloatToHalf(x, n, wd.type, rounded_x_.as<uint16_t>(), stream()));
      a = rounded_x_.get();
    }
    GemmNT(blas_, m, out, in, wd.type, a, wd.data, y, out, false);
    if (bd.data != nullptr) {
      STRATA_CUDA_CHECK(
          cuda_ops::AddBias(y, static_cast<const float*>(bd.data), m, out, stream()));
    }
  }

  void Embed(const TensorView& table, const int32_t* ids, int n, float* out) override {
    LookUp(table, ids, n, /*accumulate=*/false, out);
  }

  void AddPositionEmbedding(const TensorView& pos_table, const int32_t* positions, int n,
                            float* x) override {
    LookUp(pos_table, positions, n, /*accumulate=*/true, x);
  }

  void LayerNorm(const float* x, const TensorView& w, const TensorView& b, float eps, int rows,
                 int dim, float* y) override {
    BeginOp();
    const float* wd = Floats(w);
    const float* bd = b.present() ? Floats(b) : nullptr;
    STRATA_CUDA_CHECK(cuda_ops::LayerNorm(x, wd, bd, eps, rows, dim, y, stream()));
  }

  void RmsNorm(const float* x, const TensorView& w, float eps, int rows, int dim,
               float* y) override {
    BeginOp();
    STRATA_CUDA_CHECK(cuda_ops::RmsNorm(x, Floats(w), eps, rows, dim, y, stream()));
  }

  void Activate(ActivationKind kind, float* x, int64_t n) override {
    if (kind == ActivationKind::kRelu) {
      STRATA_CUDA_CHECK(cuda_ops::Relu(x, n, stream()));
    } else {
      STRATA_CUDA_CHECK(cuda_ops::Gelu(x, n, stream()));
    }
  }

  void SiluMul(float* gate, const float* up, int64_t n) override {
    STRATA_CUDA_CHECK(cuda_ops::SiluMul(gate, up, n, stream()));
  }

  void Rope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
            const float* inv_freq) override {
    const auto* pos = static_cast<const int32_t*>(Stage(positions, sizeof(int32_t) * tokens, 0));
    const auto* freq = static_cast<const float*>(Stage(inv_freq, sizeof(float) * (head_dim / 2), 1));
    STRATA_CUDA_CHECK(cuda_ops::ApplyRope(x, pos, tokens, heads, head_dim, freq, stream()));
  }

  void Attention(const AttentionShape& shape, const float* q, const float* k, const float* v,
                 const int* start, float* out) override {
    kernels::cuda::CausalAttentionShape s;
    s.batch = shape.batch;
    s.new_tokens = shape.new_tokens;
    s.num_heads = shape.num_heads;
    s.num_kv_heads = shape.num_kv_heads;
    s.head_dim = shape.head_dim;
    s.max_len = shape.max_len;
    s.cache_len = shape.cache_len;
    s.scale = shape.scale;
    const auto* st = static_cast<const int*>(Stage(start, sizeof(int) * shape.batch, 0));
    STRATA_CUDA_CHECK(cuda_ops::CausalAttention(s, q, k, v, st, out, stream()));
  }

  void Add(float* x, const float* y, int64_t n) override {
    STRATA_CUDA_CHECK(cuda_ops::Add(x, y, n, stream()));
  }

 private:
  cudaStream_t stream() const { return stream_.get(); }

  // Starts an op: cached weights it touches from now on are protected from eviction until the
  // next op begins.
  void BeginOp() { ++clock_; }

  void LookUp(const TensorView& table, const int32_t* ids, int n, bool accumulate, float* out) {
    STRATA_CHECK(table.shape.size() == 2);
    BeginOp();
    if (!OnDevice(ids)) {
      for (int i = 0; i < n; ++i) STRATA_CHECK(ids[i] >= 0 && ids[i] < table.dim(0));
    }
    const DeviceTensor td = Resident(table, Form::kAsStored);
    const auto* dev_ids = static_cast<const int32_t*>(Stage(ids, sizeof(int32_t) * n, 0));
    STRATA_CUDA_CHECK(
        cuda_ops::Embed(td.data, td.type, table.dim(1), dev_ids, n, accumulate, out, stream()));
  }

  const float* Floats(const TensorView& t) {
    return static_cast<const float*>(Resident(t, Form::kFloat).data);
  }

  // A device copy of `bytes` at p when p is host memory (in staging slot `slot`), else p itself.
  const void* Stage(const void* p, size_t bytes, int slot) {
    if (bytes == 0 || OnDevice(p)) return p;
    DeviceBuffer& buf = staging_[slot];
    buf.Reserve(bytes);
    STRATA_CUDA_CHECK(cudaMemcpyAsync(buf.get(), p, bytes, cudaMemcpyHostToDevice, stream()));
    return buf.get();
  }

  DeviceTensor Resident(const TensorView& t, Form form) {
    if (t.dtype == DType::kQ4) return ResidentQ4(t);
    const ElemType stored = ElemTypeOf(t.dtype);
    const bool on_device = OnDevice(t.data);
    if (on_device && (form == Form::kAsStored || stored == ElemType::kF32)) {
      return {t.data, stored};
    }
    const CacheKey key{t.data, t.bytes(), t.dtype, form};
    const ElemType type = form == Form::kFloat ? ElemType::kF32 : stored;
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      it->second.last_use = clock_;
      return {it->second.buffer.get(), type};
    }
    const size_t n = static_cast<size_t>(t.numel());
    const size_t bytes = type == ElemType::kF32 ? n * sizeof(float) : t.bytes();
    EvictFor(bytes);
    DeviceBuffer buf(bytes);
    if (on_device) {
      STRATA_CUDA_CHECK(
          cuda_ops::ToFloat(t.data, stored, static_cast<int64_t>(n), buf.as<float>(), stream()));
    } else if (type == ElemType::kF32 && stored != ElemType::kF32) {
      std::vector<float> widened(n);
      ConvertToFloat(t.dtype, t.data, widened.data(), n);
      // A pageable copy returns once the source is staged, so `widened` may go right after.
      STRATA_CUDA_CHECK(
          cudaMemcpyAsync(buf.get(), widened.data(), bytes, cudaMemcpyHostToDevice, stream()));
    } else {
      STRATA_CUDA_CHECK(
          cudaMemcpyAsync(buf.get(), t.data, bytes, cudaMemcpyHostToDevice, stream()));
    }
    const void* data = buf.get();
    cached_bytes_ += bytes;
    cache_.emplace(key, Entry{std::move(buf), clock_});
    return {data, type};
  }

  // A kQ4 matrix expanded to fp32 on the host (as the CPU backend expands it) and cached on the
  // device like any converted copy.
  DeviceTensor ResidentQ4(const TensorView& t) {
    const CacheKey key{t.data, t.bytes(), t.dtype, Form::kFloat};
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      it->second.last_use = clock_;
      return {it->second.buffer.get(), ElemType::kF32};
    }
    const auto* planes = static_cast<const Q4Planes*>(t.data);
    std::vector<float> expanded(static_cast<size_t>(t.numel()));
    kernels::cpu::ExpandWeightQ4(planes->codes, planes->params, static_cast<long>(t.dim(0)),
                                 static_cast<long>(t.dim(1)), planes->group, expanded.data());
    const size_t bytes = expanded.size() * sizeof(float);
    EvictFor(bytes);
    DeviceBuffer buf(bytes);
    // A pageable copy returns once the source is staged, so `expanded` may go right after.
    STRATA_CUDA_CHECK(
        cudaMemcpyAsync(buf.get(), expanded.data(), bytes, cudaMemcpyHostToDevice, stream()));
    const void* data = buf.get();
    cached_bytes_ += bytes;
    cache_.emplace(key, Entry{std::move(buf), clock_});
    return {data, ElemType::kF32};
  }

  // Frees least recently used copies until `bytes` more fit under the cap. cudaFree waits for the
  // device, so no queued kernel can still be reading a freed copy.
  void EvictFor(size_t bytes) {
    if (options_.weight_cache_bytes == 0) return;
    while (cached_bytes_ + bytes > options_.weight_cache_bytes) {
      auto victim = cache_.end();
      for (auto it = cache_.begin(); it != cache_.end(); ++it) {
        if (it->second.last_use < clock_ &&
            (victim == cache_.end() || it->second.last_use < victim->second.last_use)) {
          victim = it;
        }
      }
      if (victim == cache_.end()) return;  // everything left is in use by this op
      cached_bytes_ -= victim->second.buffer.bytes();
      cache_.erase(victim);
    }
  }

  struct Entry {
    DeviceBuffer buffer;
    uint64_t last_use = 0;
  };

  CudaBackendOptions options_;
  CudaStream stream_;
  CublasHandle blas_;
  DeviceBuffer rounded_x_;   // activations rounded to fp16/bf16 for a GEMM
  DeviceBuffer staging_[2];  // host index arrays copied in
  std::unordered_map<CacheKey, Entry, CacheKeyHash> cache_;
  uint64_t cached_bytes_ = 0;
  uint64_t clock_ = 0;
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
