// Group-wise 4-bit weights expanded on the device into a dense matrix for cuBLAS, at most once per
// layer per block (the expanded copy is shared by every micro-batch of the block). CUDA twin of
// kernels/cpu/weight_q4.h's ExpandWeightQ4, whose header defines the format: groups of 64
// consecutive input elements of one row of W[rows = out_features, cols = in_features], quantized
// like a 4-bit KV cache group (kernels/kv_q4_format.h);
//   codes  [rows, cols / 2] bytes: in row r, group g, byte j (0..31) holds column 64g + j in its
//          low nibble and column 64g + 32 + j in its high nibble;
//   params [rows, cols / 64, 2] fp16: {scale, minimum} per group;
//   W[r, c] = code * float(scale) + float(minimum), the product rounded before the sum (no FMA),
// so the fp32 expansion is bit-identical to the CPU's. REQUIRES: cols % 64 == 0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

inline constexpr int kWeightQ4Group = 64;

// ---- kernels ----

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// One thread per 4 code bytes: 8 outputs, columns j..j+3 and j+32..j+35 of one group.
template <typename T>
__global__ void ExpandWeightQ4Kernel(const uint8_t* codes, const __half* params, int64_t rows,
                                      int cols, T* out) {
  const int words_per_row = cols / 8;
  const int64_t n = rows * words_per_row;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < n;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = w / words_per_row;
    const int wi = static_cast<int>(w % words_per_row);
    const int g = wi / 8;
    const int j = 4 * (wi % 8);
    const uint32_t word = reinterpret_cast<const uint32_t*>(codes)[w];
    const __half* p = params + (r * (cols / kWeightQ4Group) + g) * 2;
    const float scale = __half2float(p[0]);
    const float minimum = __half2float(p[1]);
    T* dst = out + r * cols + kWeightQ4Group * g + j;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t byte = (word >> (8 * i)) & 0xFFu;
      dst[i] = FromFloat<T>(__fadd_rn(__fmul_rn(static_cast<float>(byte & 0xFu), scale), minimum));
      dst[32 + i] = FromFloat<T>(__fadd_rn(__fmul_rn(static_cast<float>(byte >> 4), scale), minimum));
    }
  }
}

// ---- launchers ----

// out[rows, cols] (of type `type`: fp32, fp16 or bf16) = the expanded weight. codes 4-byte
// aligned; all pointers device memory.
inline cudaError_t ExpandWeightQ4(const uint8_t* codes, const __half* params, int64_t rows,
                                   int cols, ElemType type, void* out, cudaStream_t stream) {
  if (cols <= 0 || cols % kWeightQ4Group != 0 || rows < 0) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(codes) % 4 != 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned grid = GridFor(rows * (cols / 8), 256);
  switch (type) {
    case ElemType::kF32:
      ExpandWeightQ4Kernel<float><<<grid, 256, 0, stream>>>(codes, params, rows, cols,
                                                              static_cast<float*>(out));
      break;
    case ElemType::kF16:
      ExpandWeightQ4Kernel<__half><<<grid, 256, 0, stream>>>(codes, params, rows, cols,
                                                               static_cast<__half*>(out));
      break;
    case ElemType::kBF16:
      ExpandWeightQ4Kernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(
          codes, params, rows, cols, static_cast<__nv_bfloat16*>(out));
      break;
  }
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
