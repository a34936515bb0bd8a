#include "src/backend/device_probes.h"

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cpu/weight_q4.h"
#include "kernels/kv_q4_format.h"
#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_resources.h"
#include "src/backend/cuda/gemm.h"
#include "src/backend/cuda/gemm_lt.h"
#include "src/backend/cuda/gemm_plans.h"
#include "src/backend/cuda/median_ms.h"
#include "src/backend/cuda/ops.h"

namespace strata::profile {
namespace {

using kernels::cuda::ElemType;

double PerSecond(double amount, double ms) { return amount / (ms * 1e-3); }

// Pinned host memory (cudaHostAlloc), as the executor's staging is pinned.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) { STRATA_CUDA_CHECK(cudaHostAlloc(&data_, bytes, 0)); }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

// Device memory of `bytes` holding the byte `fill` everywhere (0x3C: fp16 values near 1.05, and
// valid 4-bit codes and fp16 params).
DeviceBuffer Filled(size_t bytes, int fill = 0x3C) {
  DeviceBuffer b(bytes);
  STRATA_CUDA_CHECK(cudaMemset(b.get(), fill, bytes));
  return b;
}

void MeasureCopies(const CudaStream& stream, size_t bytes, DeviceRates& r) {
  PinnedBuffer host(bytes);
  const DeviceBuffer a = Filled(bytes), b = Filled(bytes);
  const auto copy = [&](void* dst, const void* src, cudaMemcpyKind kind) {
    return MedianMs(stream, 1, 5, [&] {
      STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream.get()));
    });
  };
  r.h2d_gbps = PerSecond(bytes, copy(a.get(), host.get(), cudaMemcpyHostToDevice)) / 1e9;
  r.d2h_gbps = PerSecond(bytes, copy(host.get(), a.get(), cudaMemcpyDeviceToHost)) / 1e9;
  r.d2d_gbps = PerSecond(bytes, copy(b.get(), a.get(), cudaMemcpyDeviceToDevice)) / 1e9;
  r.memory_gbps = 2 * r.d2d_gbps;
}

// Milliseconds of a Linear's fp16 GEMM of `rows` rows over w [n, k], without a bias, as the
// backend runs it: on cuBLASLt, or on cublasGemmEx where cuBLASLt has no algorithm.
double LinearGemmMs(const CudaStream& stream, const CublasHandle& handle, LtGemm& lt, int rows,
                    int n, int k, const void* x, const void* w, void* y) {
  const GemmOperands operands{x, w, nullptr, y};
  const LtGemmKey key =
      LtGemmKeyOf(rows, n, k, SpanType::kF16, SpanType::kF16, /*relu=*/false, operands);
  void* workspace = handle.workspace();
  return MedianMs(stream, 1, 5, [&] {
    if (!lt.Run(key, operands, workspace, CublasHandle::kDefaultWorkspaceBytes, stream.get())) {
      GemmNTHalfOut(handle, rows, n, k, ElemType::kF16, x, w, y, n);
    }
  });
}

// fp16 GEMM of `rows` x 4096 x 4096 with fp16 output, as the engine's Linears run on fp16
// activations (the emulated device's GemmTflops has the same shapes).
double GemmTflops(const CudaStream& stream, const CublasHandle& handle, LtGemm& lt, int rows) {
  constexpr int kDim = 4096;
  const DeviceBuffer a = Filled(size_t{2} * rows * kDim), b = Filled(size_t{2} * kDim * kDim);
  DeviceBuffer c(size_t{2} * rows * kDim);
  const double ms =
      LinearGemmMs(stream, handle, lt, rows, kDim, kDim, a.get(), b.get(), c.get());
  return PerSecond(2.0 * rows * kDim * kDim, ms) / 1e12;
}

// DeviceRates::gemm_tflops_by_rows: a layer's Linears at OPT-30B's widths, rows 1 to 8192.
std::vector<std::pair<int64_t, double>> GemmCurve(const CudaStream& stream,
                                                  const CublasHandle& handle, LtGemm& lt) {
  constexpr int kHidden = 7168, kFfn = 28672, kMaxRows = 8192;
  struct Shape {
    int n, k;
  };
  const Shape layer[] = {{kHidden, kHidden}, {kHidden, kHidden}, {kHidden, kHidden},
                         {kHidden, kHidden}, {kFfn, kHidden},    {kHidden, kFfn}};
  const DeviceBuffer x = Filled(size_t{2} * kMaxRows * kFfn), y(size_t{2} * kMaxRows * kFfn);
  std::vector<DeviceBuffer> weights;
  for (const Shape& s : layer) weights.push_back(Filled(size_t{2} * s.n * s.k));
  std::vector<std::pair<int64_t, double>> curve;
  for (int rows = 1; rows <= kMaxRows; rows *= 2) {
    double ms = 0, flops = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      ms += LinearGemmMs(stream, handle, lt, rows, layer[i].n, layer[i].k, x.get(),
                         weights[i].get(), y.get());
      flops += 2.0 * rows * layer[i].n * layer[i].k;
    }
    curve.emplace_back(rows, PerSecond(flops, ms) / 1e12);
  }
  return curve;
}

// Decode attention, 32 query heads on 8 KV heads of head_dim 128 at a 4096-token context (the
// emulated device's shape, with more sequences so that the cache is far past L2): cache bytes
// read per second from an fp16 cache and from the 4-bit cache.
void MeasureDecodeAttention(const CudaStream& stream, DeviceRates& r) {
  cuda_ops::DecodeAttentionShape s{64, 32, 8, 128, 4096, 4096, 0.088f, false};
  const size_t slots = size_t{64} * s.num_kv_heads * s.max_len;
  const DeviceBuffer q = Filled(sizeof(float) * s.batch * s.num_heads * s.head_dim, 0);
  DeviceBuffer out(q.bytes());
  const DeviceBuffer start = Filled(sizeof(int) * s.batch, 0);
  {
    const size_t bytes = slots * s.head_dim * 2;
    const DeviceBuffer k = Filled(bytes), v = Filled(bytes);
    cuda_ops::DecodeAttentionPlan plan;
    STRATA_CUDA_CHECK(cuda_ops::PlanDecodeAttention(s, cuda_ops::DecodeCacheKind::kF16, &plan));
    DeviceBuffer workspace(plan.workspace_bytes);
    const double ms = MedianMs(stream, 1, 10, [&] {
      STRATA_CUDA_CHECK(cuda_ops::DecodeAttentionF16(
          s, q.as<float>(), k.as<__half>(), v.as<__half>(), start.as<int>(), plan, workspace.get(),
          out.as<float>(), stream.get()));
    });
    r.attention_gbps = PerSecond(2.0 * bytes, ms) / 1e9;
  }
  const size_t codes = slots * kernels::Q4CodeBytes(s.head_dim);
  const size_t params = slots * kernels::Q4ParamHalves(s.head_dim) * sizeof(__half);
  const DeviceBuffer kc = Filled(codes), vc = Filled(codes), kp = Filled(params),
                     vp = Filled(params);
  cuda_ops::DecodeAttentionPlan plan;
  STRATA_CUDA_CHECK(cuda_ops::PlanDecodeAttention(s, cuda_ops::DecodeCacheKind::kQ4, &plan));
  DeviceBuffer workspace(plan.workspace_bytes);
  const double ms = MedianMs(stream, 1, 10, [&] {
    STRATA_CUDA_CHECK(cuda_ops::DecodeAttentionQ4(
        s, q.as<float>(), kc.as<uint8_t>(), kp.as<__half>(), vc.as<uint8_t>(), vp.as<__half>(),
        start.as<int>(), plan, workspace.get(), out.as<float>(), stream.get()));
  });
  r.attention_q4_gbps = PerSecond(2.0 * (codes + params), ms) / 1e9;
}

// Causal prefill attention over a 512-token prompt (the emulated device's shape), in TFLOPS
// counted as 4 * tokens^2 * heads * head_dim.
double PrefillAttentionTflops(const CudaStream& stream) {
  const cuda_ops::CausalAttentionShape s{1, 512, 32, 8, 128, 512, 512, 0.088f};
  const DeviceBuffer q = Filled(sizeof(float) * s.new_tokens * s.num_heads * s.head_dim, 0);
  DeviceBuffer out(q.bytes());
  const size_t cache = size_t{2} * s.num_kv_heads * s.max_len * s.head_dim;
  const DeviceBuffer k = Filled(cache), v = Filled(cache), start = Filled(sizeof(int), 0);
  const double ms = MedianMs(stream, 1, 10, [&] {
    STRATA_CUDA_CHECK(cuda_ops::CausalAttention(s, q.as<float>(), k.as<__half>(), v.as<__half>(),
                                                start.as<int>(), out.as<float>(), stream.get()));
  });
  return PerSecond(4.0 * s.new_tokens * s.new_tokens * s.num_heads * s.head_dim, ms) / 1e12;
}

// 4-bit expansion of a 4096 x 4096 matrix to fp16, as the emulated device's ExpandQ4Gbps.
double ExpandQ4Gbps(const CudaStream& stream) {
  constexpr long kDim = 4096;
  const DeviceBuffer codes = Filled(kernels::cpu::WeightQ4CodeBytes(kDim, kDim));
  const DeviceBuffer params = Filled(
      kernels::cpu::WeightQ4ParamHalves(kDim, kDim, kernels::cpu::kWeightQ4Group) * sizeof(__half));
  DeviceBuffer out(size_t{2} * kDim * kDim);
  const double ms = MedianMs(stream, 1, 10, [&] {
    STRATA_CUDA_CHECK(cuda_ops::ExpandWeightQ4(codes.as<uint8_t>(), params.as<__half>(), kDim, kDim,
                                               kernels::cpu::kWeightQ4Group, ElemType::kF16,
                                               out.get(), stream.get()));
  });
  return PerSecond(2.0 * kDim * kDim, ms) / 1e9;
}

}  // namespace

std::optional<DeviceRates> MeasureDevice(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    *why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device";
    return std::nullopt;
  }
  STRATA_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  size_t free_bytes = 0, total_bytes = 0;
  STRATA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  DeviceRates r;
  r.name = prop.name;
  r.capacity_bytes = static_cast<int64_t>(free_bytes);
  r.cache_bytes = prop.l2CacheSize;
  const CudaStream stream;
  const CublasHandle handle(stream.get());
  LtGemm lt;
  MeasureCopies(stream, std::min<size_t>(size_t{256} << 20, free_bytes / 8), r);
  r.prefill_tflops = GemmTflops(stream, handle, lt, 512);
  r.decode_tflops = GemmTflops(stream, handle, lt, 16);
  r.gemm_tflops_by_rows = GemmCurve(stream, handle, lt);
  MeasureDecodeAttention(stream, r);
  r.attention_prefill_tflops = PrefillAttentionTflops(stream);
  r.dequant_gbps = ExpandQ4Gbps(stream);
  return r;
}

}  // namespace strata::profile
