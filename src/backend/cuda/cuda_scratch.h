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

// How a Linear runs its GEMM, by the type of its activations x and of its weight
// (CudaBackendOptions::fp32_gemm). Every path accumulates in fp32 (CUBLAS_COMPUTE_32F, never
// TF32); y is fp32 with fp32 x, and x's type or fp32 (the logits) with fp16/bf16 x.
enum class GemmPath {
  // fp32 activations:
  kFp32,            // F32 weights: an fp32 GEMM on the activations as they are
  kHalfTensorCore,  // F16/BF16 weights: activations rounded to the weight's type, a tensor-core
                    // GEMM (the default)
  kWidenedFp32,     // F16/BF16 weights with fp32_gemm: the weight widened to fp32, an fp32 GEMM
  // fp16/bf16 activations (fp32_gemm plays no part: the GEMM's inputs are the activations' type):
  kHalf,           // weights of the activations' type: a tensor-core GEMM on both as they are
  kRoundedWeight,  // weights of another type (F32, or the other half type): the weight rounded to
                   // the activations' type, then as kHalf
};
// "fp32", "half_tensor_core", "widened_fp32", "half", "rounded_weight"
const char* GemmPathName(GemmPath path);

struct GemmChoice {
  GemmPath path = GemmPath::kFp32;
  uint64_t rounded_x_bytes = 0;       // kHalfTensorCore: the m x in activations as 16-bit
  uint64_t widened_weight_bytes = 0;  // kWidenedFp32: the out x in weight as fp32
  uint64_t rounded_weight_bytes = 0;  // kRoundedWeight: the out x in weight as 16-bit
};

// The GEMM of y[m, out] = x[m, in] * w[out, in]^T for activations of `activations` and a weight
// of `weight_type`. REQUIRES (checked): both kF32, kF16 or kBF16; m, in, out >= 0.
GemmChoice ChooseGemm(SpanType activations, SpanType weight_type, bool fp32_gemm, int64_t m,
                      int64_t in, int64_t out);

// Whether Attention runs a decode step (new_tokens == 1) over an fp16 dense cache at `head_dim`
// on the flash-decoding kernel (attention_decode.cuh's DecodeAttentionF16, head_dim 64 or 128),
// which takes fp32 queries and outputs (kWideActivations) and splits long caches
// (kDecodeWorkspace); otherwise on the causal attention kernel, which needs no scratch.
bool DecodesOnF16Kernel(SpanType activations, int head_dim);

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
  kDecodeWorkspace,    // AttendKvQ4, Attention's fp16 decode: decode attention's partial outputs
  kLimitedLogits,      // SampleTokens: rows cut to their first `limit` logits
  kSamplingWorkspace,  // SampleTokens: sorting planes and CUB's storage
  kResults,            // sampled ids or log-probabilities on their way to the host
  kRoundedWeight,      // Linear: a weight rounded to the activations' type (kRoundedWeight)
  kWideActivations0,   // fp16/bf16 activations widened to fp32 for the kernels that take fp32:
  kWideActivations1,   // the 4-bit cache ops' k_new and v_new, or q and out; Attention's fp16
                       // decode q and out (two live at once)
  kLinearBias,  // Linear with fp16/bf16 activations: a bias of another type in theirs, as
                // cuBLASLt's bias epilogue reads it (gemm_lt.h)
};
inline constexpr int kCudaScratchBuffers = 16;
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

// Bytes of each kWideActivations buffer for a run within `limits` (0 with fp32 activations): the
// larger of a step's k_new or v_new [batch * step_tokens, num_kv_heads * head_dim] (with the
// 4-bit cache) and a decode step's q or out [batch, num_heads, head_dim], as fp32.
uint64_t WideActivationsBytes(const OpLimits& limits);

// The scratch allocation of a run: each buffer's bytes (0: unused) and offset.
struct CudaScratchLayout {
  std::array<uint64_t, kCudaScratchBuffers> bytes{};
  std::array<uint64_t, kCudaScratchBuffers> offset{};  // multiples of kCudaScratchAlignment
  uint64_t total_bytes = 0;  // the allocation: past the last buffer, aligned

  uint64_t bytes_of(CudaScratchBuffer b) const { return bytes[static_cast<int>(b)]; }
  uint64_t offset_of(CudaScratchBuffer b) const { return offset[static_cast<int>(b)]; }
};

// The scratch of a run whose ops stay within `limits`, for a backend with `fp32_gemm`. With
// fp16/bf16 activations (limits.activations) kRoundedWeight holds the largest weight of another
// type (limits.rounded_weight_elements) rounded to theirs, and kLinearBias the widest bias
// (limits.linear_out values) in theirs.
// `sampling_workspace_bytes`: what the sampler's planner asks for `limits.batch` rows of
// `limits.vocab` logits (cuda_ops::SampleTokensWorkspaceBytes, a CUDA call: CUB sizes its own
// storage); 0 when limits.batch or vocab is 0.
CudaScratchLayout CudaScratchLayoutFor(const OpLimits& limits, bool fp32_gemm,
                                       uint64_t sampling_workspace_bytes);

}  // namespace strata
