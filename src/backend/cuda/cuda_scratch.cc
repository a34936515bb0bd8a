#include "src/backend/cuda/cuda_scratch.h"

#include <algorithm>

#include "kernels/cuda/decode_q4c_params.h"
#include "kernels/cuda/params.h"
#include "src/core/check.h"

namespace strata {
namespace {

uint64_t U(int64_t n) { return static_cast<uint64_t>(std::max<int64_t>(n, 0)); }

bool Dense(SpanType t) {
  return t == SpanType::kF32 || t == SpanType::kF16 || t == SpanType::kBF16;
}

// Decode attention's partial outputs: `rows` query heads each with `splits` parts of head_dim
// values and a log-sum-exp (attention_decode*.cuh's workspace_bytes).
uint64_t DecodeWorkspaceBytes(int64_t query_heads, int splits, int head_dim) {
  return splits > 1 ? U(query_heads) * U(splits) * (U(head_dim) + 1) * sizeof(float) : 0;
}

// AttendKvQ4's largest plan: keys by channel plan whole sequences of every query head at once;
// per-token keys one (sequence, KV head) at a time, its group of query heads.
uint64_t Q4WorkspaceBytes(const OpLimits& l) {
  if (!l.kv_q4 || l.num_kv_heads <= 0) return 0;
  if (l.kv_q4_format.keys_by_channel) {
    return DecodeWorkspaceBytes(int64_t{l.batch} * l.num_heads,
                                DecodeSplitsBound(l.max_len, kQ4ChannelTileTokens), l.head_dim);
  }
  return DecodeWorkspaceBytes(l.num_heads / l.num_kv_heads,
                              DecodeSplitsBound(l.max_len, kDecodeTileTokens), l.head_dim);
}

// The largest decode plan: AttendKvQ4's, or Attention's fp16 decode (every query head of the
// batch at once).
uint64_t LargestDecodeWorkspaceBytes(const OpLimits& l) {
  const uint64_t dense =
      DecodesOnF16Kernel(l.activations, l.head_dim)
          ? DecodeWorkspaceBytes(int64_t{l.batch} * l.num_heads,
                                 DecodeSplitsBound(l.max_len, kDecodeTileTokens), l.head_dim)
          : 0;
  return std::max(dense, Q4WorkspaceBytes(l));
}

// Staging slot 0: Embed's ids and Rope's positions (a row each), attention's starts, the
// sampler's parameters and ScoreTokens' tokens (a sequence each). Slot 1: RoPE's frequencies,
// the 4-bit cache's table of rows.
uint64_t Staging0Bytes(const OpLimits& l) {
  return std::max({U(l.rows) * sizeof(int32_t), U(l.batch) * sizeof(int32_t),
                   U(l.batch) * sizeof(kernels::cuda::SamplingParams)});
}
uint64_t Staging1Bytes(const OpLimits& l) {
  const uint64_t table =
      l.kv_q4 ? U(int64_t{l.batch} * l.num_kv_heads) * sizeof(kernels::cuda::Q4ChannelRow) : 0;
  return std::max(U(l.head_dim / 2) * sizeof(float), table);
}

uint64_t AlignUp(uint64_t n) {
  return (n + kCudaScratchAlignment - 1) / kCudaScratchAlignment * kCudaScratchAlignment;
}

}  // namespace

const char* GemmPathName(GemmPath path) {
  switch (path) {
    case GemmPath::kFp32: return "fp32";
    case GemmPath::kHalfTensorCore: return "half_tensor_core";
    case GemmPath::kWidenedFp32: return "widened_fp32";
    case GemmPath::kHalf: return "half";
    case GemmPath::kRoundedWeight: return "rounded_weight";
  }
  return "?";
}

GemmChoice ChooseGemm(SpanType activations, SpanType weight_type, bool fp32_gemm, int64_t m,
                      int64_t in, int64_t out) {
  STRATA_CHECK_MSG(Dense(weight_type), "a Linear weight is not F32, F16 or BF16");
  STRATA_CHECK_MSG(Dense(activations), "Linear activations are not F32, F16 or BF16");
  STRATA_CHECK(m >= 0 && in >= 0 && out >= 0);
  GemmChoice c;
  if (activations != SpanType::kF32) {
    if (weight_type == activations) {
      c.path = GemmPath::kHalf;
    } else {
      c.path = GemmPath::kRoundedWeight;
      c.rounded_weight_bytes = U(out) * U(in) * sizeof(uint16_t);
    }
    return c;
  }
  if (weight_type == SpanType::kF32) return c;
  if (fp32_gemm) {
    c.path = GemmPath::kWidenedFp32;
    c.widened_weight_bytes = U(out) * U(in) * sizeof(float);
  } else {
    c.path = GemmPath::kHalfTensorCore;
    c.rounded_x_bytes = U(m) * U(in) * sizeof(uint16_t);
  }
  return c;
}

const char* CudaScratchBufferName(CudaScratchBuffer buffer) {
  switch (buffer) {
    case CudaScratchBuffer::kCublasWorkspace: return "cublas_workspace";
    case CudaScratchBuffer::kRoundedX: return "rounded_x";
    case CudaScratchBuffer::kWidenedMatrix: return "widened_matrix";
    case CudaScratchBuffer::kWidenedVector0: return "widened_vector.0";
    case CudaScratchBuffer::kWidenedVector1: return "widened_vector.1";
    case CudaScratchBuffer::kStaging0: return "staging.0";
    case CudaScratchBuffer::kStaging1: return "staging.1";
    case CudaScratchBuffer::kKvHeadRows: return "kv_head_rows";
    case CudaScratchBuffer::kDecodeWorkspace: return "decode_workspace";
    case CudaScratchBuffer::kLimitedLogits: return "limited_logits";
    case CudaScratchBuffer::kSamplingWorkspace: return "sampling_workspace";
    case CudaScratchBuffer::kResults: return "results";
    case CudaScratchBuffer::kRoundedWeight: return "rounded_weight";
    case CudaScratchBuffer::kWideActivations0: return "wide_activations.0";
    case CudaScratchBuffer::kWideActivations1: return "wide_activations.1";
    case CudaScratchBuffer::kLinearBias: return "linear_bias";
  }
  return "?";
}

int DecodeSplitsBound(int max_len, int tile_tokens) {
  STRATA_CHECK(tile_tokens > 0);
  const int64_t tiles = (std::max<int64_t>(max_len, 0) + tile_tokens - 1) / tile_tokens;
  return static_cast<int>(
      std::clamp<int64_t>(tiles / kDecodeMinTilesPerSplit, 1, kDecodeMaxSplits));
}

uint64_t KvHeadRowsBytes(int tokens, int head_dim) {
  return 2 * U(tokens) * U(head_dim) * sizeof(float);
}

bool DecodesOnF16Kernel(SpanType activations, int head_dim) {
  return activations == SpanType::kF16 && (head_dim == 64 || head_dim == 128);
}

uint64_t WideActivationsBytes(const OpLimits& l) {
  if (l.activations == SpanType::kF32) return 0;
  const uint64_t step_kv =
      l.kv_q4 ? U(l.batch) * U(l.step_tokens) * U(l.num_kv_heads) * U(l.head_dim) : 0;
  const uint64_t decode_queries = U(l.batch) * U(l.num_heads) * U(l.head_dim);
  return std::max(step_kv, decode_queries) * sizeof(float);
}

CudaScratchLayout CudaScratchLayoutFor(const OpLimits& l, bool fp32_gemm,
                                       uint64_t sampling_workspace_bytes) {
  CudaScratchLayout layout;
  auto set = [&](CudaScratchBuffer b, uint64_t bytes) {
    layout.bytes[static_cast<int>(b)] = bytes;
  };
  set(CudaScratchBuffer::kCublasWorkspace, kCublasWorkspaceBytes);
  // The Linears' paths: fp32 activations over half weights round x or widen the weight; half
  // activations round the weights of another type (see the header).
  if (l.activations == SpanType::kF32) {
    const SpanType weights = l.half_weights ? SpanType::kF16 : SpanType::kF32;
    const GemmChoice widest =
        ChooseGemm(l.activations, weights, fp32_gemm, l.rows, l.linear_in, l.linear_out);
    set(CudaScratchBuffer::kRoundedX, widest.rounded_x_bytes);
    if (widest.path == GemmPath::kWidenedFp32) {
      set(CudaScratchBuffer::kWidenedMatrix, U(l.linear_weight_elements) * sizeof(float));
    }
  } else {
    set(CudaScratchBuffer::kRoundedWeight, U(l.rounded_weight_elements) * sizeof(uint16_t));
    set(CudaScratchBuffer::kLinearBias, U(l.linear_out) * sizeof(uint16_t));
  }
  if (l.half_weights) {
    const uint64_t vector = std::max(U(l.linear_in), U(l.linear_out)) * sizeof(float);
    set(CudaScratchBuffer::kWidenedVector0, vector);
    set(CudaScratchBuffer::kWidenedVector1, vector);
  }
  set(CudaScratchBuffer::kStaging0, Staging0Bytes(l));
  set(CudaScratchBuffer::kStaging1, Staging1Bytes(l));
  if (l.kv_q4) set(CudaScratchBuffer::kKvHeadRows, KvHeadRowsBytes(l.step_tokens, l.head_dim));
  set(CudaScratchBuffer::kDecodeWorkspace, LargestDecodeWorkspaceBytes(l));
  const uint64_t sampled = U(l.batch);
  set(CudaScratchBuffer::kLimitedLogits, sampled * U(l.vocab) * sizeof(float));
  set(CudaScratchBuffer::kSamplingWorkspace, sampled > 0 ? sampling_workspace_bytes : 0);
  set(CudaScratchBuffer::kResults, sampled * sizeof(double));
  set(CudaScratchBuffer::kWideActivations0, WideActivationsBytes(l));
  set(CudaScratchBuffer::kWideActivations1, WideActivationsBytes(l));
  uint64_t at = 0;
  for (int i = 0; i < kCudaScratchBuffers; ++i) {
    layout.offset[i] = at;
    at += AlignUp(layout.bytes[i]);
  }
  layout.total_bytes = at;
  return layout;
}

}  // namespace strata
