// Causal attention over an fp32, fp16 or bf16 KV cache, for prefill (many new tokens) and, less
// efficiently, decode: the CUDA twin of kernels/cpu/attention.h's CausalAttention, with the same
// layouts and the same treatment of left padding (start[b]) and grouped-query heads. q and out are
// fp32 over any cache, or of the cache's half type (activations kept in fp16 or bf16: the kernel
// widens q, k and v as it stages them and rounds only out). A prefill
// that fills the 4-bit cache calls WriteQ4Cache (kv_q4.cuh) on the same new rows separately.
//
// Tiling. A block owns one (sequence, KV head) and 32 query rows, where row r is
// (token r / group, query head r % group) of that KV head's group, so a decode step with GQA still
// fills the block and every K/V tile is read once for all the heads that share it. K and V tiles of
// 32 keys are staged in shared memory as fp32; each warp owns 8 query rows and keeps their online
// softmax state (max, denominator, output) in registers: lane j scores key j of the tile, then lane
// j accumulates output dims j, j+32, ... Plain fp32 CUDA-core arithmetic: prefill attention is a
// few percent of a layer's FLOPs next to the GEMMs, and this keeps fp32 caches exact to rounding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

namespace prefill {

inline constexpr int kRows = 32;  // query rows per block
inline constexpr int kKeys = 32;  // keys per tile
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kRowsPerWarp = kRows / kWarps;

// Shared memory: Q rows, K tile (rows padded by 4 floats so that lanes reading different keys at
// the same dims hit different banks with 16-byte loads), V tile, and each warp's probabilities.
inline size_t SmemBytes(int head_dim) {
  return sizeof(float) * (static_cast<size_t>(kRows) * head_dim +
                          static_cast<size_t>(kKeys) * (head_dim + 4) +
                          static_cast<size_t>(kKeys) * head_dim + kWarps * kKeys * kRowsPerWarp);
}

// ---- kernels ----

__device__ __forceinline__ float4 LoadFloat4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ float4 LoadFloat4(const __half* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 a = __half22float2(Half2FromBits(u.x));
  const float2 b = __half22float2(Half2FromBits(u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ float4 LoadFloat4(const __nv_bfloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

// A: the element type of q and out; T: of the cache.
template <typename A, typename T, int kMaxHeadDim>
__global__ void __launch_bounds__(kThreads)
    CausalAttentionKernel(CausalAttentionShape s, const A* q, const T* k, const T* v,
                          const int* start, A* out) {
  constexpr int kDimsPerLane = kMaxHeadDim / 32;
  extern __shared__ float4 smem4[];
  const int d = s.head_dim;
  float* s_q = reinterpret_cast<float*>(smem4);
  float* s_k = s_q + kRows * d;
  float* s_v = s_k + kKeys * (d + 4);
  float* s_p = s_v + kKeys * d;  // [warp][key][row]

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int kv_head = blockIdx.y;
  const int b = blockIdx.z;
  const int group = s.num_heads / s.num_kv_heads;
  const int64_t rows_total = static_cast<int64_t>(s.new_tokens) * group;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int first_new_slot = s.cache_len - s.new_tokens;
  const int key_lo = max(start[b], 0);

  // Stage the block's query rows, pre-scaled; rows past the end are zeros.
  for (int i = threadIdx.x; i < kRows * (d / 4); i += kThreads) {
    const int r = i / (d / 4);
    const int c = 4 * (i % (d / 4));
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int64_t row = row0 + r;
    if (row < rows_total) {
      const int64_t tok = row / group;
      const int head = kv_head * group + static_cast<int>(row % group);
      x = LoadFloat4(q + ((b * static_cast<int64_t>(s.new_tokens) + tok) * s.num_heads + head) * d +
                     c);
      x.x *= s.scale;
      x.y *= s.scale;
      x.z *= s.scale;
      x.w *= s.scale;
    }
    *reinterpret_cast<float4*>(s_q + r * d + c) = x;
  }

  // The slot of each of this warp's rows; INT_MIN-like sentinel for rows past the end.
  int slot[kRowsPerWarp];
  int block_last_slot = -1;
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int64_t row = row0 + warp * kRowsPerWarp + j;
    slot[j] = row < rows_total ? first_new_slot + static_cast<int>(row / group) : -1;
  }
  {
    const int64_t last_row = min(row0 + kRows, rows_total) - 1;
    block_last_slot = first_new_slot + static_cast<int>(last_row / group);
  }

  float m_run[kRowsPerWarp];
  float l_run[kRowsPerWarp];  // this lane's share of the denominators
  float o[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    m_run[j] = -INFINITY;
    l_run[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) o[j][i] = 0.0f;
  }

  const int64_t head_base = (static_cast<int64_t>(b) * s.num_kv_heads + kv_head) * s.max_len;
  float* s_pw = s_p + warp * kKeys * kRowsPerWarp;
  for (int key0 = key_lo; key0 <= block_last_slot; key0 += kKeys) {
    __syncthreads();  // the previous tile (and, first time, s_q) is complete / no longer read
    for (int i = threadIdx.x; i < kKeys * (d / 4); i += kThreads) {
      const int kr = i / (d / 4);
      const int c = 4 * (i % (d / 4));
      float4 kx = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float4 vx = kx;
      if (key0 + kr <= block_last_slot) {
        const int64_t off = (head_base + key0 + kr) * d + c;
        kx = LoadFloat4(k + off);
        vx = LoadFloat4(v + off);
      }
      *reinterpret_cast<float4*>(s_k + kr * (d + 4) + c) = kx;
      *reinterpret_cast<float4*>(s_v + kr * d + c) = vx;
    }
    __syncthreads();

    // Scores: lane = key.
    float sc[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) sc[j] = 0.0f;
    const float* krow = s_k + lane * (d + 4);
    const float* qrows = s_q + warp * kRowsPerWarp * d;
    for (int c = 0; c < d; c += 4) {
      const float4 kx = *reinterpret_cast<const float4*>(krow + c);
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        const float4 qx = *reinterpret_cast<const float4*>(qrows + j * d + c);
        sc[j] += qx.x * kx.x + qx.y * kx.y + qx.z * kx.z + qx.w * kx.w;
      }
    }
    const int key = key0 + lane;
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      const bool ok = key <= slot[j] && slot[j] >= key_lo;
      const float x = ok ? sc[j] : -INFINITY;
      const float m_new = fmaxf(m_run[j], WarpMax(x));
      const float use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = expf(m_run[j] - use);
      const float pr = expf(x - use);
      m_run[j] = m_new;
      l_run[j] = l_run[j] * alpha + pr;
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) o[j][i] *= alpha;
      s_pw[lane * kRowsPerWarp + j] = pr;
    }
    __syncwarp();

    // Outputs: lane = dims lane, lane + 32, ...
    for (int kr = 0; kr < kKeys; ++kr) {
      const float4 p0 = *reinterpret_cast<const float4*>(s_pw + kr * kRowsPerWarp);
      const float4 p1 = *reinterpret_cast<const float4*>(s_pw + kr * kRowsPerWarp + 4);
      const float pr[kRowsPerWarp] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int dim = lane + 32 * i;
        const float vx = dim < d ? s_v[kr * d + dim] : 0.0f;
#pragma unroll
        for (int j = 0; j < kRowsPerWarp; ++j) o[j][i] += pr[j] * vx;
      }
    }
    __syncwarp();  // s_pw is rewritten by the next tile
  }

#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int64_t row = row0 + warp * kRowsPerWarp + j;
    if (row >= rows_total) continue;
    const float l = WarpSum(l_run[j]);
    const int64_t tok = row / group;
    const int head = kv_head * group + static_cast<int>(row % group);
    A* dst = out + ((b * static_cast<int64_t>(s.new_tokens) + tok) * s.num_heads + head) * d;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int dim = lane + 32 * i;
      if (dim < d) dst[dim] = FromFloat<A>(l > 0.0f ? o[j][i] / l : 0.0f);
    }
  }
}

template <typename A, typename T, int kMaxHeadDim>
cudaError_t Run(const CausalAttentionShape& s, const A* q, const T* k, const T* v,
                const int* start, A* out, cudaStream_t stream) {
  const size_t smem = SmemBytes(s.head_dim);
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(CausalAttentionKernel<A, T, kMaxHeadDim>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const int64_t rows = static_cast<int64_t>(s.new_tokens) * (s.num_heads / s.num_kv_heads);
  const dim3 grid(static_cast<unsigned>((rows + kRows - 1) / kRows), s.num_kv_heads, s.batch);
  CausalAttentionKernel<A, T, kMaxHeadDim><<<grid, kThreads, smem, stream>>>(s, q, k, v, start,
                                                                             out);
  return cudaGetLastError();
}

template <typename A, typename T>
cudaError_t Dispatch(const CausalAttentionShape& s, const A* q, const T* k, const T* v,
                     const int* start, A* out, cudaStream_t stream) {
  if (s.num_kv_heads <= 0 || s.num_heads % s.num_kv_heads != 0 || s.head_dim <= 0 ||
      s.head_dim % 4 != 0 || s.new_tokens < 0 || s.new_tokens > s.cache_len ||
      s.cache_len > s.max_len || s.batch > 65535 || s.num_kv_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (s.batch == 0 || s.new_tokens == 0) return cudaSuccess;
  STRATA_DISPATCH_MAX_HEAD_DIM(s.head_dim, kMaxHeadDim,
                               { return Run<A, T, kMaxHeadDim>(s, q, k, v, start, out, stream); });
}

}  // namespace prefill

// ---- launchers ----

// Causal attention over an fp32 cache. q, k, v, out and start (int[batch]) are device memory,
// 16-byte aligned. REQUIRES: head_dim a multiple of 4 and at most 256 (above 128 the block needs
// about 100 KB of shared memory: sm_80 and sm_90); num_heads a multiple of num_kv_heads.
inline cudaError_t CausalAttention(const CausalAttentionShape& s, const float* q, const float* k,
                                   const float* v, const int* start, float* out,
                                   cudaStream_t stream) {
  return prefill::Dispatch(s, q, k, v, start, out, stream);
}

// The same over an fp16 cache (8-byte aligned).
inline cudaError_t CausalAttention(const CausalAttentionShape& s, const float* q, const __half* k,
                                   const __half* v, const int* start, float* out,
                                   cudaStream_t stream) {
  return prefill::Dispatch(s, q, k, v, start, out, stream);
}

// The same with fp16 q, k, v and out, all 8-byte aligned (fp16 activations and cache).
inline cudaError_t CausalAttention(const CausalAttentionShape& s, const __half* q, const __half* k,
                                   const __half* v, const int* start, __half* out,
                                   cudaStream_t stream) {
  return prefill::Dispatch(s, q, k, v, start, out, stream);
}

// The same with bf16 q, k, v and out, all 8-byte aligned (bf16 activations and cache).
inline cudaError_t CausalAttention(const CausalAttentionShape& s, const __nv_bfloat16* q,
                                   const __nv_bfloat16* k, const __nv_bfloat16* v,
                                   const int* start, __nv_bfloat16* out, cudaStream_t stream) {
  return prefill::Dispatch(s, q, k, v, start, out, stream);
}

}  // namespace strata::kernels::cuda
