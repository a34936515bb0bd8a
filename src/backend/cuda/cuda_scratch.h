// The CUDA backend's device scratch as plain C++ (no CUDA header), so that CI checks it without a
// GPU: which GEMM a Linear runs and what scratch that takes, and the one allocation
// Backend::ReserveScratch makes for a run's OpLimits (src/backend/shapes.h), cut into the buffers
// the ops use. The ops (cuda_backend.cc) take their needs from the same functions, so a need the
// sizing forgot fails the op's check, never a silent cudaMalloc. Thread-safe pure functions.
#pragma once

#include <array>
#include <cstdint>

#include "src/backend/memory.h"
#include "src/backend/shapes.h"

namespace strata {

// How a Linear over a weight of `type` runs its GEMM (CudaBackendOptions::fp32_gemm).
enum class GemmPath {
  kFp32,            // F32 weights: an fp32 GEMM on the activations as they are
  kHalfTensorCore,  // F16/BF16 weights: activations rounded to the weight's type, a tensor-core
                    // GEMM with fp32 accumulation (the default)
  kWidenedFp32,     // F16/BF16 weights with fp32_gemm: the weight widened to fp32, an fp32 GEMM
};
const char* GemmPathName(GemmPath path);  // "fp32", "half_tensor_core", "widened_fp32"

struct GemmChoice {
  GemmPath path = GemmPath::kFp32;
  uint64_t rounded_x_bytes = 0;       // kHalfTensorCore: the m x in activations as 16-bit
  uint64_t widened_weight_bytes = 0;  // kWidenedFp32: the out x in weight as fp32
};

// The GEMM of y[m, out] = x[m, in] * w[out, in]^T for a weight of `weight_type`.
// REQUIRES (checked): weight_type is kF32, kF16 or kBF16; m, in, out >= 0.
GemmChoice ChooseGemm(SpanType weight_type, bool fp32_gemm, int64_t m, int64_t in, int64_t out);

// The scratch buffers, in the order they lie in the scratch allocation.
enum class CudaScratchBuffer {
  kCublasWorkspace,  // cuBLAS's workspace, the GEMMs' only device memory
  kRoundedX,         // Linear: activations rounded to fp16/bf16 (GemmPath::kHalfTensorCore)
  kWidenedMatrix,    // Linear: a weight widened to fp32 (GemmPath::kWidenedFp32)
  kWidenedVector0,   // norm weights and biases widened to fp32, two live at once
  kWidenedVector1,
  kStaging0,           // host arrays copied in, two an op: ids, positions, starts, sampling
  kStaging1,           // parameters; RoPE frequencies, the 4-bit cache's table of rows
  kKvHeadRows,         // WriteKvQ4: one KV head's step keys and values, written alone
  kQ4Workspace,        // AttendKvQ4: decode attention's partial outputs
  kLimitedLogits,      // SampleTokens: rows cut to their first `limit` logits
  kSamplingWorkspace,  // SampleTokens: sorting planes and CUB's storage
  kResults,            // sampled ids or log-probabilities on their way to the host
};
inline constexpr int kCudaScratchBuffers = 12;
const char* CudaScratchBufferName(CudaScratchBuffer buffer);  // e.g. "rounded_x"

// Every buffer begins at a multiple of this (the sampler wants 256 bytes; cudaMalloc gives 256).
inline constexpr uint64_t kCudaScratchAlignment = 256;
// NVIDIA's recommended cuBLAS workspace on Hopper (smaller suffices elsewhere).
inline constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;

// The decode attention planners' bound on splits of a sequence: tiles of `tile_tokens` slots, at
// least kDecodeMinTilesPerSplit tiles a split, at most kDecodeMaxSplits splits. Mirrors
// kernels/cuda/attention_decode.cuh (per-token keys: 16-slot tiles) and attention_decode_q4c.cuh
// (keys by channel: 32-slot tiles), which host C++ cannot include; AttendKvQ4 checks each plan's
// workspace against the reservation, so a planner that outgrows these fails loudly.
inline constexpr int kDecodeTileTokens = 16;
inline constexpr int kQ4ChannelTileTokens = 32;
inline constexpr int kDecodeMinTilesPerSplit = 8;
inline constexpr int kDecodeMaxSplits = 256;
// The most splits a plan for caches of up to `max_len` slots takes: in [1, kDecodeMaxSplits].
int DecodeSplitsBound(int max_len, int tile_tokens);

// Bytes of WriteKvQ4's one-head buffer for steps of `tokens` tokens: keys then values, fp32.
uint64_t KvHeadRowsBytes(int tokens, int head_dim);

// The scratch allocation of a run: each buffer's bytes (0: unused) and offset.
struct CudaScratchLayout {
  std::array<uint64_t, kCudaScratchBuffers> bytes{};
  std::array<uint64_t, kCudaScratchBuffers> offset{};  // multiples of kCudaScratchAlignment
  uint64_t total_bytes = 0;  // the allocation: past the last buffer, aligned

  uint64_t bytes_of(CudaScratchBuffer b) const { return bytes[static_cast<int>(b)]; }
  uint64_t offset_of(CudaScratchBuffer b) const { return offset[static_cast<int>(b)]; }
};

// The scratch of a run whose ops stay within `limits`, for a backend with `fp32_gemm`.
// `sampling_workspace_bytes`: what the sampler's planner asks for `limits.batch` rows of
// `limits.vocab` logits (cuda_ops::SampleTokensWorkspaceBytes, a CUDA call: CUB sizes its own
// storage); 0 when limits.batch or vocab is 0.
CudaScratchLayout CudaScratchLayoutFor(const OpLimits& limits, bool fp32_gemm,
                                       uint64_t sampling_workspace_bytes);

}  // namespace strata
