// Prefill at tensor-core speed (issue 30): strata's tensor-core prefill attention (causal, fp16)
// and its Linears' GEMM (cuBLASLt, fp16 in and out, fp32 accumulation, with and without the bias
// in the epilogue) at the shapes, against the
// figures PyTorch reached on the H200 on 2026-11-27. bench/cuda/prefill_reference.py measures
// PyTorch on the machine at hand with the same shapes and the same RESULT format.
//
// Attention FLOPs follow FlashAttention's benchmarks: 4 * seqs * heads * tokens^2 * head_dim / 2
// for causal attention. GEMM FLOPs: 2 * m * n * k.
//
// Prints one "RESULT key=value ..." line per measurement (scripts/gpu_check.sh turns them into a
// table): kernel=prefill with target= the FlashAttention-2 backend's figure (pass=1 when met) and
// cudnn= the cuDNN backend's; kernel=prefill_variant for each block shape the plan did not choose
// (no target); kernel=gemm and kernel=gemm_bias with target= 0.95 of PyTorch's cuBLAS figure and
// path= cublaslt, or gemm_ex where cuBLASLt had no algorithm. Exits non-zero only when
// CUDA fails, never on a missed target; 2 without a CUDA device.
//
// Usage: prefill_bench [--quick] [--skip-gemm] [--skip-attention] [--shape I]
//   --shape I: only attention shape I of kAttentionShapes (0-based) and no GEMMs (for ncu).
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/backend/cuda/cuda_resources.h"
#include "src/backend/cuda/gemm.h"
#include "src/backend/cuda/gemm_lt.h"
#include "src/backend/cuda/gemm_plans.h"
#include "src/backend/cuda/median_ms.h"
#include "src/backend/cuda/ops.h"
#include "src/core/dtype.h"

namespace strata {
namespace {

constexpr double kGemmTargetRatio = 0.95;

struct AttentionShape {
  int head_dim, tokens, seqs, heads, kv_heads;
  double fa2_tflops;    // PyTorch SDPA, FlashAttention-2 backend, H200 (0: none)
  double cudnn_tflops;  // PyTorch SDPA, cuDNN backend, H200 (0: none)
};

// The shapes; the head_dim 64 shape is not named there, 512 tokens x 64 x 56 is assumed.
// The grouped-query row has no reference and reports no verdict.
const AttentionShape kAttentionShapes[] = {
    {128, 512, 64, 56, 56, 177, 367}, {128, 2048, 16, 56, 56, 320, 544},
    {128, 4096, 4, 32, 32, 309, 580}, {64, 512, 64, 56, 56, 140, 213},
    {128, 2048, 16, 32, 8, 0, 0},
};

struct GemmShape {
  int m, n, k;
  double torch_tflops;  // PyTorch cuBLAS fp16, H200
};

const GemmShape kGemmShapes[] = {
    {8192, 7168, 7168, 780}, {8192, 28672, 7168, 735}, {16384, 8192, 8192, 646},
    {256, 28672, 7168, 552}, {64, 7168, 7168, 172},
};

// Fills n halves of device memory with normal(0, 1) values from a repeated 16 MiB block.
void FillHalves(void* dst, size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t block = std::min<size_t>(n, size_t{8} << 20);
  std::vector<uint16_t> host(block);
  for (uint16_t& h : host) h = FloatToHalf(dist(rng));
  for (size_t off = 0; off < n; off += block) {
    STRATA_CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(dst) + off, host.data(),
                                 sizeof(uint16_t) * std::min(block, n - off),
                                 cudaMemcpyHostToDevice));
  }
}

void RunAttention(const AttentionShape& sh, int reps, const CudaStream& stream,
                  std::mt19937_64& rng) {
  const size_t q_n = static_cast<size_t>(sh.seqs) * sh.tokens * sh.heads * sh.head_dim;
  const size_t kv_n = static_cast<size_t>(sh.seqs) * sh.tokens * sh.kv_heads * sh.head_dim;
  DeviceBuffer q(2 * q_n), k(2 * kv_n), v(2 * kv_n), out(2 * q_n);
  FillHalves(q.get(), q_n, rng);
  FillHalves(k.get(), kv_n, rng);
  FillHalves(v.get(), kv_n, rng);
  const std::vector<int> start_host(sh.seqs, 0);
  DeviceBuffer start(sizeof(int) * sh.seqs);
  STRATA_CUDA_CHECK(
      cudaMemcpy(start.get(), start_host.data(), sizeof(int) * sh.seqs, cudaMemcpyHostToDevice));
  const cuda_ops::CausalAttentionShape s{
      sh.seqs,     sh.tokens, sh.heads,  sh.kv_heads,
      sh.head_dim, sh.tokens, sh.tokens, 1.0f / std::sqrt(static_cast<float>(sh.head_dim))};
  cuda_ops::PrefillAttentionPlan planned;
  STRATA_CUDA_CHECK(cuda_ops::PlanPrefillAttention(s, &planned));
  const double flops =
      4.0 * sh.seqs * sh.heads * static_cast<double>(sh.tokens) * sh.tokens * sh.head_dim / 2.0;
  const cuda_ops::PrefillAttentionPlan shapes[] = {planned, {4, 16}, {8, 16}, {4, 32}};
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); ++i) {
    const cuda_ops::PrefillAttentionPlan& plan = shapes[i];
    const bool is_plan = i == 0;
    if (!is_plan && plan.warps == planned.warps && plan.warp_rows == planned.warp_rows) continue;
    const double ms = MedianMs(stream, 3, reps, [&] {
      STRATA_CUDA_CHECK(cuda_ops::PrefillAttentionF16(
          s, plan, q.as<const __half>(), k.as<const __half>(), v.as<const __half>(),
          start.as<const int>(), out.as<__half>(), stream.get()));
    });
    const double tflops = flops / (ms * 1e-3) / 1e12;
    std::printf(
        "RESULT kernel=%s head_dim=%d tokens=%d seqs=%d heads=%d kv_heads=%d warps=%d "
        "warp_rows=%d ms=%.4f tflops=%.1f",
        is_plan ? "prefill" : "prefill_variant", sh.head_dim, sh.tokens, sh.seqs, sh.heads,
        sh.kv_heads, plan.warps, plan.warp_rows, ms, tflops);
    if (is_plan && sh.fa2_tflops > 0) {
      std::printf(" target=%.0f ratio=%.3f cudnn=%.0f ratio_cudnn=%.3f pass=%d", sh.fa2_tflops,
                  tflops / sh.fa2_tflops, sh.cudnn_tflops, tflops / sh.cudnn_tflops,
                  tflops >= sh.fa2_tflops ? 1 : 0);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}

// One GEMM shape as the backend's Linears run it (cuBLASLt, gemm_lt.h): without a bias
// (kernel=gemm) and with one in the epilogue (kernel=gemm_bias, PyTorch's F.linear with a bias).
void RunGemm(const GemmShape& sh, int reps, const CudaStream& stream, const CublasHandle& cublas,
             LtGemm& lt, std::mt19937_64& rng) {
  const size_t a_n = static_cast<size_t>(sh.m) * sh.k;
  const size_t b_n = static_cast<size_t>(sh.n) * sh.k;
  const size_t c_n = static_cast<size_t>(sh.m) * sh.n;
  DeviceBuffer a(2 * a_n), b(2 * b_n), c(2 * c_n), bias(2 * static_cast<size_t>(sh.n));
  FillHalves(a.get(), a_n, rng);
  FillHalves(b.get(), b_n, rng);
  FillHalves(bias.get(), sh.n, rng);
  for (const bool with_bias : {false, true}) {
    const GemmOperands operands{a.get(), b.get(), with_bias ? bias.get() : nullptr, c.get()};
    const LtGemmKey key = LtGemmKeyOf(sh.m, sh.n, sh.k, SpanType::kF16, SpanType::kF16,
                                      /*relu=*/false, operands);
    bool on_lt = true;
    const double ms = MedianMs(stream, 5, reps, [&] {
      on_lt = lt.Run(key, operands, cublas.workspace(), CublasHandle::kDefaultWorkspaceBytes,
                     stream.get());
      if (!on_lt) {
        GemmNTHalfOut(cublas, sh.m, sh.n, sh.k, kernels::cuda::ElemType::kF16, a.get(), b.get(),
                      c.get(), sh.n);
      }
    });
    const double tflops = 2.0 * sh.m * sh.n * static_cast<double>(sh.k) / (ms * 1e-3) / 1e12;
    const double ratio = tflops / sh.torch_tflops;
    std::printf(
        "RESULT kernel=%s m=%d n=%d k=%d path=%s ms=%.4f tflops=%.1f torch=%.0f ratio=%.3f "
        "target=%.2f pass=%d\n",
        with_bias ? "gemm_bias" : "gemm", sh.m, sh.n, sh.k, on_lt ? "cublaslt" : "gemm_ex", ms,
        tflops, sh.torch_tflops, ratio, kGemmTargetRatio, ratio >= kGemmTargetRatio ? 1 : 0);
    std::fflush(stdout);
  }
}

int Main(int argc, char** argv) {
  bool quick = false, gemm = true, attention = true;
  int only_shape = -1;
  constexpr int kNumShapes = sizeof(kAttentionShapes) / sizeof(kAttentionShapes[0]);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      only_shape = std::atoi(argv[++i]);
      gemm = false;
      if (only_shape < 0 || only_shape >= kNumShapes) {
        std::fprintf(stderr, "prefill_bench: --shape takes 0 to %d\n", kNumShapes - 1);
        return 2;
      }
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--skip-gemm") == 0) {
      gemm = false;
    } else if (std::strcmp(argv[i], "--skip-attention") == 0) {
      attention = false;
    } else {
      std::fprintf(stderr,
                   "usage: prefill_bench [--quick] [--skip-gemm] [--skip-attention] [--shape I]\n");
      return 2;
    }
  }
  const CudaDeviceInfo info = QueryCudaDevices();
  if (info.device_count == 0) {
    std::fprintf(stderr, "prefill_bench: no CUDA device: %s\n", info.error.c_str());
    return 2;
  }
  STRATA_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("prefill_bench: %s, %d SMs; reference figures from the H200 (issue 30)\n", prop.name,
              prop.multiProcessorCount);
  const int reps = quick ? 5 : 20;
  std::mt19937_64 rng(1);
  CudaStream stream;
  if (attention) {
    for (int i = 0; i < kNumShapes; ++i) {
      if (only_shape < 0 || i == only_shape) RunAttention(kAttentionShapes[i], reps, stream, rng);
    }
  }
  if (gemm) {
    CublasHandle cublas(stream.get());
    LtGemm lt;
    for (const GemmShape& sh : kGemmShapes) RunGemm(sh, reps, stream, cublas, lt, rng);
  }
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) { return strata::Main(argc, argv); }
