// Writing and reading the 4-bit KV cache of kernels/kv_q4_format.h on the device. CUDA twins of
// kernels/cpu/kv_q4.h (WriteQ4Cache, and the row reader as DequantizeQ4Cache): the same rounding
// (parameters rounded to fp16 first, codes round-to-nearest-even, 0 when the scale is 0) and the
// same Walsh–Hadamard butterfly order for rotated keys, so both sides write identical bytes.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::cuda {

inline constexpr int kQ4MaxHeadDim = 256;

// ---- kernels ----

// One warp per (sequence, token, KV head) item, in the CPU writer's order. The head vector is
// staged in shared memory (rotated there when asked), then each group of G elements is reduced
// to {min, max} across the warp: lane j < G/2 owns elements j and j + G/2, which is exactly the
// byte it writes.
__global__ void __launch_bounds__(128) WriteQ4CacheKernel(Q4CacheShape s, const float* rows,
                                                          int tokens, int first_slot, bool rotate,
                                                          uint8_t* codes, __half* params) {
  __shared__ float stage[4][kQ4MaxHeadDim];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int d = s.head_dim;
  const int g = Q4Group(d);
  const int half = g / 2;
  const int64_t work = static_cast<int64_t>(s.batch) * tokens * s.num_kv_heads;
  float* x = stage[warp];
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * 4 + warp; w < work;
       w += static_cast<int64_t>(gridDim.x) * 4) {
    const int h = static_cast<int>(w % s.num_kv_heads);
    const int t = static_cast<int>((w / s.num_kv_heads) % tokens);
    const int64_t b = w / (static_cast<int64_t>(s.num_kv_heads) * tokens);
    const float* src = rows + w * d;
    for (int i = lane; i < d; i += 32) x[i] = src[i];
    __syncwarp();
    if (rotate) {
      WarpHadamard(x, d, lane);
      const float norm = 1.0f / sqrtf(static_cast<float>(d));
      for (int i = lane; i < d; i += 32) x[i] *= norm;
      __syncwarp();
    }
    const int64_t row = (b * s.num_kv_heads + h) * s.max_len + first_slot + t;
    uint8_t* row_codes = codes + row * Q4CodeBytes(d);
    __half* row_params = params + row * Q4ParamHalves(d);
    for (int gi = 0; gi < d / g; ++gi) {
      const float* xg = x + gi * g;
      float x0 = 0.0f, x1 = 0.0f, lo = INFINITY, hi = -INFINITY;
      if (lane < half) {
        x0 = xg[lane];
        x1 = xg[lane + half];
        lo = fminf(x0, x1);
        hi = fmaxf(x0, x1);
      }
      for (int offset = 16; offset > 0; offset /= 2) {
        lo = fminf(lo, __shfl_xor_sync(kFullMask, lo, offset));
        hi = fmaxf(hi, __shfl_xor_sync(kFullMask, hi, offset));
      }
      const __half scale_h = __float2half_rn((hi - lo) / 15.0f);
      const __half min_h = __float2half_rn(lo);
      const float scale = __half2float(scale_h);
      const float minimum = __half2float(min_h);
      if (lane < half) {
        int q0 = 0, q1 = 0;
        if (scale != 0.0f) {
          q0 = static_cast<int>(fminf(fmaxf(rintf((x0 - minimum) / scale), 0.0f), 15.0f));
          q1 = static_cast<int>(fminf(fmaxf(rintf((x1 - minimum) / scale), 0.0f), 15.0f));
        }
        row_codes[gi * half + lane] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
      if (lane == 0) {
        row_params[2 * gi] = scale_h;
        row_params[2 * gi + 1] = min_h;
      }
    }
    __syncwarp();  // the next item overwrites x
  }
}

// One thread per element of the plane: x = code * scale + minimum with the product rounded
// before the sum (no FMA contraction), the exact arithmetic of the CPU reader.
__global__ void DequantizeQ4CacheKernel(int64_t rows, int head_dim, const uint8_t* codes,
                                        const __half* params, float* out) {
  const int g = Q4Group(head_dim);
  const int half = g / 2;
  const int64_t n = rows * head_dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / head_dim;
    const int e = static_cast<int>(i % head_dim);
    const int gi = e / g;
    const int j = e % g;
    const uint8_t byte = codes[row * Q4CodeBytes(head_dim) + gi * half + j % half];
    const int code = j < half ? (byte & 0xF) : (byte >> 4);
    const __half* p = params + row * Q4ParamHalves(head_dim) + 2 * gi;
    out[i] = __fadd_rn(__fmul_rn(static_cast<float>(code), __half2float(p[0])),
                       __half2float(p[1]));
  }
}

// ---- launchers ----

// True when head_dim is valid for the format and for these kernels (at most 256).
inline bool Q4HeadDimSupported(int head_dim) {
  return head_dim > 0 && head_dim % 2 == 0 && head_dim <= kQ4MaxHeadDim &&
         (head_dim <= kQ4MaxGroup || head_dim % kQ4MaxGroup == 0);
}

// Quantizes rows[batch * tokens, num_kv_heads * head_dim] (token-major, as a Linear writes them)
// into slots [first_slot, first_slot + tokens) of the planes codes / params (device memory,
// layouts of kv_q4_format.h). With `rotate`, each head vector is Walsh–Hadamard rotated first.
// REQUIRES: Q4HeadDimSupported(head_dim); rotate => head_dim a power of two;
// 0 <= first_slot, first_slot + tokens <= max_len.
inline cudaError_t WriteQ4Cache(const Q4CacheShape& s, const float* rows, int tokens,
                                int first_slot, bool rotate, uint8_t* codes, __half* params,
                                cudaStream_t stream) {
  if (!Q4HeadDimSupported(s.head_dim)) return cudaErrorInvalidValue;
  if (rotate && (s.head_dim & (s.head_dim - 1)) != 0) return cudaErrorInvalidValue;
  if (first_slot < 0 || tokens < 0 || first_slot + tokens > s.max_len) return cudaErrorInvalidValue;
  const int64_t work = static_cast<int64_t>(s.batch) * tokens * s.num_kv_heads;
  if (work == 0) return cudaSuccess;
  const int64_t blocks = (work + 3) / 4;
  WriteQ4CacheKernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 128, 0, stream>>>(
      s, rows, tokens, first_slot, rotate, codes, params);
  return cudaGetLastError();
}

// out[batch, num_kv_heads, max_len, head_dim] = every row of the planes, dequantized to fp32.
// REQUIRES: Q4HeadDimSupported(head_dim).
inline cudaError_t DequantizeQ4Cache(const Q4CacheShape& s, const uint8_t* codes,
                                     const __half* params, float* out, cudaStream_t stream) {
  if (!Q4HeadDimSupported(s.head_dim)) return cudaErrorInvalidValue;
  const int64_t rows = static_cast<int64_t>(s.batch) * s.num_kv_heads * s.max_len;
  if (rows == 0) return cudaSuccess;
  DequantizeQ4CacheKernel<<<GridFor(rows * s.head_dim, 256), 256, 0, stream>>>(
      rows, s.head_dim, codes, params, out);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
