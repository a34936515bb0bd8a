// Writing the default 4-bit cache (kernels/kv_q4_format.h, "Keys by channel") on the device,
// through a table of rows (Q4ChannelRow) as decode attention reads it. CUDA twins of
// kernels/cpu/kv_q4_channel.h (WriteKeyGroupsByChannel), kernels/cpu/kv_q4_exact.h
// (WriteExactRows) and, for the values, kernels/cpu/kv_q4.h's per-token quantizer: the same fp32
// operations and fp16 rounding, so both sides write the same bytes.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/decode_q4c_params.h"
#include "kernels/cuda/utils.cuh"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::cuda {

namespace kv_q4c {

inline constexpr int kMaxHeadDim = 256;

// The exact row of a sequence's token `token` (counted from its first real slot): the sink's own
// row, else its ring row; -1 when there is no ring (window 0) and the token is past the sink.
__device__ __forceinline__ int ExactRowOf(int token, int sink, int window) {
  if (token < sink) return token;
  return window > 0 ? sink + token % window : -1;
}

// ---- kernels ----

// One warp per (row, group among those this write completes). Lane j owns, in each channel group
// i of g = min(64, head_dim - 64i) channels, channels 64i + j and 64i + g/2 + j (j < g/2):
// exactly the nibbles of code byte 32i + j. The key of a group token comes from this write's
// rows when written now, else from the exact ring, and sink tokens are not fitted (codes 0), as
// WriteKeyGroupsByChannel does. Param halves past 2·head_dim (head_dim 80) are written zero.
__global__ void __launch_bounds__(128)
    WriteKeyGroupsKernel(int batch, int num_kv_heads, int head_dim, int sink, int window,
                         const int* start, int first_slot, int tokens, const float* k_rows,
                         int groups_per_row, Q4ChannelRow* rows) {
  constexpr int kC = kQ4ChannelGroup;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * 4 + warp;
  if (item >= static_cast<int64_t>(batch) * num_kv_heads * groups_per_row) return;
  const int64_t r = item / groups_per_row;
  const int gi = static_cast<int>(item % groups_per_row);
  const int b = static_cast<int>(r / num_kv_heads);
  const int h = static_cast<int>(r % num_kv_heads);
  const int first = start[b];
  const int first_token = first_slot - first;
  const int end_token = first_token + tokens;
  const int g = max(0, first_token) / kC + gi;
  if ((g + 1) * kC > end_token) return;
  const Q4ChannelRow row = rows[r];
  const int d = head_dim;
  const int64_t token_stride = static_cast<int64_t>(num_kv_heads) * d;
  // The key of group token j, or null for a sink token.
  auto key = [&](int j) -> const float* {
    const int token = g * kC + j;
    const int slot = first + token;
    if (token < sink) return nullptr;
    if (slot >= first_slot) {
      return k_rows + (static_cast<int64_t>(b) * tokens + (slot - first_slot)) * token_stride +
             static_cast<int64_t>(h) * d;
    }
    return row.k_exact + static_cast<int64_t>(sink + token % window) * d;
  };
  const int64_t slot0 = first + static_cast<int64_t>(g) * kC;
  uint16_t* params = row.k_params + slot0 * Q4ChannelParamHalves(d);
  uint8_t* codes = row.k_codes + slot0 * Q4CodeBytes(d);
  for (int x = 2 * d + lane; x < kC * Q4ChannelParamHalves(d); x += 32) params[x] = 0;
  for (int i = 0; 64 * i < d; ++i) {
    const int half = min(64, d - 64 * i) / 2;
    if (lane >= half) break;
    const int c0 = 64 * i + lane;
    const int c1 = c0 + half;
    float lo0 = INFINITY, hi0 = -INFINITY, lo1 = INFINITY, hi1 = -INFINITY;
    for (int j = 0; j < kC; ++j) {
      const float* k = key(j);
      if (k == nullptr) continue;
      lo0 = fminf(lo0, k[c0]);
      hi0 = fmaxf(hi0, k[c0]);
      lo1 = fminf(lo1, k[c1]);
      hi1 = fmaxf(hi1, k[c1]);
    }
    if (lo0 > hi0) lo0 = hi0 = 0.0f;  // nothing fitted
    if (lo1 > hi1) lo1 = hi1 = 0.0f;
    const __half scale0_h = __float2half_rn((hi0 - lo0) / 15.0f);
    const __half min0_h = __float2half_rn(lo0);
    const __half scale1_h = __float2half_rn((hi1 - lo1) / 15.0f);
    const __half min1_h = __float2half_rn(lo1);
    params[2 * c0] = __half_as_ushort(scale0_h);
    params[2 * c0 + 1] = __half_as_ushort(min0_h);
    params[2 * c1] = __half_as_ushort(scale1_h);
    params[2 * c1 + 1] = __half_as_ushort(min1_h);
    const float scale0 = __half2float(scale0_h), minimum0 = __half2float(min0_h);
    const float scale1 = __half2float(scale1_h), minimum1 = __half2float(min1_h);
    for (int j = 0; j < kC; ++j) {
      const float* k = key(j);
      int q0 = 0, q1 = 0;
      if (k != nullptr) {
        if (scale0 != 0.0f) {
          q0 = static_cast<int>(
              fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(k[c0], minimum0), scale0)), 0.0f), 15.0f));
        }
        if (scale1 != 0.0f) {
          q1 = static_cast<int>(
              fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(k[c1], minimum1), scale1)), 0.0f), 15.0f));
        }
      }
      codes[static_cast<int64_t>(j) * Q4CodeBytes(d) + 32 * i + lane] =
          static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// One warp per (sequence, token, KV head): the token's key and value copied to its exact row (the
// key rotated first when asked, in hadamard.cc's butterfly order). Of several tokens of this write
// that share a ring row only the last is written, so that the result does not depend on order.
__global__ void __launch_bounds__(128)
    WriteExactRowsKernel(int batch, int num_kv_heads, int head_dim, int sink, int window,
                         const float* k_rows, const float* v_rows, int tokens, int first_slot,
                         const int* start, bool rotate_keys, float norm, Q4ChannelRow* rows) {
  __shared__ float stage[4][kMaxHeadDim];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int d = head_dim;
  const int work = batch * tokens * num_kv_heads;  // < 2^31 (the launcher checks)
  float* x = stage[warp];
  for (int w = blockIdx.x * 4 + warp; w < work; w += gridDim.x * 4) {
    const int h = w % num_kv_heads;
    const int t = (w / num_kv_heads) % tokens;
    const int b = w / (num_kv_heads * tokens);
    const int token = first_slot + t - start[b];
    if (token < 0) continue;  // padding
    const int at = ExactRowOf(token, sink, window);
    if (at < 0) continue;
    if (token >= sink && t + window < tokens) continue;  // a later token of this write owns `at`
    const Q4ChannelRow& row = rows[static_cast<int64_t>(b) * num_kv_heads + h];
    const float* ks = k_rows + static_cast<int64_t>(w) * d;
    const float* vs = v_rows + static_cast<int64_t>(w) * d;
    float* kd = row.k_exact + static_cast<int64_t>(at) * d;
    float* vd = row.v_exact + static_cast<int64_t>(at) * d;
    for (int i = lane; i < d; i += 32) vd[i] = vs[i];
    if (!rotate_keys) {
      for (int i = lane; i < d; i += 32) kd[i] = ks[i];
      continue;
    }
    for (int i = lane; i < d; i += 32) x[i] = ks[i];
    __syncwarp();
    WarpHadamard(x, d, lane);
    for (int i = lane; i < d; i += 32) kd[i] = x[i] * norm;
    __syncwarp();  // the next item overwrites x
  }
}

// One warp per (sequence, token, KV head): the token's value quantized per token (groups of 64
// along head_dim, the last one shorter at head_dim 80 and 96) into its row's value planes at its
// slot, as kv_q4.cuh's WriteQ4CacheKernel.
__global__ void __launch_bounds__(128)
    WriteValueRowsKernel(int batch, int num_kv_heads, int head_dim, const float* v_rows, int tokens,
                         int first_slot, Q4ChannelRow* rows) {
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int d = head_dim;
  const int64_t work = static_cast<int64_t>(batch) * tokens * num_kv_heads;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * 4 + warp; w < work;
       w += static_cast<int64_t>(gridDim.x) * 4) {
    const int h = static_cast<int>(w % num_kv_heads);
    const int t = static_cast<int>((w / num_kv_heads) % tokens);
    const int b = static_cast<int>(w / (static_cast<int64_t>(num_kv_heads) * tokens));
    const Q4ChannelRow row = rows[static_cast<int64_t>(b) * num_kv_heads + h];
    const float* src = v_rows + w * d;
    const int64_t slot = first_slot + t;
    uint8_t* codes = row.v_codes + slot * Q4CodeBytes(d);
    uint16_t* params = row.v_params + slot * Q4ParamHalves(d);
    for (int gi = 0; 64 * gi < d; ++gi) {
      const int half = min(64, d - 64 * gi) / 2;  // lanes past it hold no element of the group
      const bool mine = lane < half;
      const float x0 = mine ? src[64 * gi + lane] : 0.0f;
      const float x1 = mine ? src[64 * gi + half + lane] : 0.0f;
      float lo = mine ? fminf(x0, x1) : INFINITY;
      float hi = mine ? fmaxf(x0, x1) : -INFINITY;
      for (int offset = 16; offset > 0; offset /= 2) {
        lo = fminf(lo, __shfl_xor_sync(kFullMask, lo, offset));
        hi = fmaxf(hi, __shfl_xor_sync(kFullMask, hi, offset));
      }
      const __half scale_h = __float2half_rn((hi - lo) / 15.0f);
      const __half min_h = __float2half_rn(lo);
      const float scale = __half2float(scale_h);
      const float minimum = __half2float(min_h);
      int q0 = 0, q1 = 0;
      if (scale != 0.0f) {
        q0 = static_cast<int>(
            fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x0, minimum), scale)), 0.0f), 15.0f));
        q1 = static_cast<int>(
            fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x1, minimum), scale)), 0.0f), 15.0f));
      }
      if (mine) codes[32 * gi + lane] = static_cast<uint8_t>(q0 | (q1 << 4));
      if (lane == 0) {
        params[2 * gi] = __half_as_ushort(scale_h);
        params[2 * gi + 1] = __half_as_ushort(min_h);
      }
    }
  }
}

inline unsigned WarpBlocks(int64_t items) {
  const int64_t blocks = (items + 3) / 4;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks < 1 ? 1 : blocks) : 65535 * 8);
}

}  // namespace kv_q4c

// ---- launchers ----
//
// All three take rows[batch * num_kv_heads] (device memory, row b * num_kv_heads + h) and this
// write's rows k_rows / v_rows [batch * tokens, num_kv_heads * head_dim] fp32 (token-major, as a
// Linear writes them) for slots [first_slot, first_slot + tokens); start (int[batch], device) is
// each sequence's first real slot. REQUIRES: Q4ChannelHeadDimSupported(head_dim) (else
// cudaErrorInvalidValue); first_slot + tokens <= every row's stride.

// Quantizes every key group whose last token this write holds (kernels/cpu/kv_q4_channel.h's
// WriteKeyGroupsByChannel): keys from k_rows when written now, else from the exact ring.
// REQUIRES: window >= kQ4ChannelGroup; the exact rows as before this write (run it before
// WriteExactRowsQ4Channel), or either way when tokens == 1.
inline cudaError_t WriteKeyGroupsQ4Channel(int batch, int num_kv_heads, int head_dim, int sink,
                                           int window, const int* start, int first_slot, int tokens,
                                           const float* k_rows, Q4ChannelRow* rows,
                                           cudaStream_t stream) {
  if (!Q4ChannelHeadDimSupported(head_dim)) return cudaErrorInvalidValue;
  if (sink < 0 || window < kQ4ChannelGroup || first_slot < 0 || tokens < 0) {
    return cudaErrorInvalidValue;
  }
  // A write of n tokens completes at most n / 32 + 1 groups of a row.
  const int groups_per_row = tokens / kQ4ChannelGroup + 1;
  const int64_t items = static_cast<int64_t>(batch) * num_kv_heads * groups_per_row;
  if (items == 0 || tokens == 0) return cudaSuccess;
  if ((items + 3) / 4 > 0x7FFFFFFF) return cudaErrorInvalidValue;
  kv_q4c::WriteKeyGroupsKernel<<<static_cast<unsigned>((items + 3) / 4), 128, 0, stream>>>(
      batch, num_kv_heads, head_dim, sink, window, start, first_slot, tokens, k_rows,
      groups_per_row, rows);
  return cudaGetLastError();
}

// Stores the exact tokens of this write in their rows' exact planes (kernels/cpu/kv_q4_exact.h's
// WriteExactRows, keys rotated when `rotate_keys`, which needs a power-of-two head_dim).
inline cudaError_t WriteExactRowsQ4Channel(int batch, int num_kv_heads, int head_dim, int sink,
                                           int window, const float* k_rows, const float* v_rows,
                                           int tokens, int first_slot, const int* start,
                                           bool rotate_keys, Q4ChannelRow* rows,
                                           cudaStream_t stream) {
  if (!Q4ChannelHeadDimSupported(head_dim)) return cudaErrorInvalidValue;
  if (sink < 0 || window < 0 || tokens < 0) return cudaErrorInvalidValue;
  if (rotate_keys && (head_dim & (head_dim - 1)) != 0) return cudaErrorInvalidValue;
  const int64_t work = static_cast<int64_t>(batch) * tokens * num_kv_heads;
  if (work == 0) return cudaSuccess;
  if (work > 0x7FFFFFFF) return cudaErrorInvalidValue;
  // The norm as hadamard.cc computes it (both sqrt and division correctly rounded).
  const float norm = 1.0f / std::sqrt(static_cast<float>(head_dim));
  kv_q4c::WriteExactRowsKernel<<<kv_q4c::WarpBlocks(work), 128, 0, stream>>>(
      batch, num_kv_heads, head_dim, sink, window, k_rows, v_rows, tokens, first_slot, start,
      rotate_keys, norm, rows);
  return cudaGetLastError();
}

// Quantizes this write's values per token into their rows' value planes.
inline cudaError_t WriteValueRowsQ4Channel(int batch, int num_kv_heads, int head_dim,
                                           const float* v_rows, int tokens, int first_slot,
                                           Q4ChannelRow* rows, cudaStream_t stream) {
  if (!Q4ChannelHeadDimSupported(head_dim)) return cudaErrorInvalidValue;
  if (first_slot < 0 || tokens < 0) return cudaErrorInvalidValue;
  const int64_t work = static_cast<int64_t>(batch) * tokens * num_kv_heads;
  if (work == 0) return cudaSuccess;
  kv_q4c::WriteValueRowsKernel<<<kv_q4c::WarpBlocks(work), 128, 0, stream>>>(
      batch, num_kv_heads, head_dim, v_rows, tokens, first_slot, rows);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
