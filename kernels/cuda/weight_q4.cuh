// Group-wise 4-bit weights expanded on the device into a dense matrix for cuBLAS, at most once per
// layer per block (the expanded copy is shared by every micro-batch of the block). CUDA twin of
// kernels/cpu/weight_q4.h's ExpandWeightQ4, whose header defines the format: groups of G (64 or
// 32) consecutive input elements of one row of W[rows = out_features, cols = in_features],
// quantized like a 4-bit KV cache group (kernels/kv_q4_format.h);
//   codes  [rows, cols / 2] bytes: in row r, group g, byte j (0..G/2 - 1) holds column G g + j in
//          its low nibble and column G g + G/2 + j in its high nibble;
//   params [rows, cols / G, 2] fp16: {scale, minimum} per group;
//   W[r, c] = code * float(scale) + float(minimum), the product rounded before the sum (no FMA),
// so the fp32 expansion is bit-identical to the CPU's. REQUIRES: cols % G == 0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

// One thread per 4 code bytes: 8 outputs, columns j..j+3 and j+G/2..j+G/2+3 of one group.
template <typename T>
__global__ void ExpandWeightQ4Kernel(const uint8_t* codes, const __half* params, int64_t rows,
                                     int cols, int group, T* out) {
  const int words_per_row = cols / 8, words_per_group = group / 8, half = group / 2;
  const int64_t n = rows * words_per_row;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < n;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = w / words_per_row;
    const int wi = static_cast<int>(w % words_per_row);
    const int g = wi / words_per_group;
    const int j = 4 * (wi % words_per_group);
    const uint32_t word = reinterpret_cast<const uint32_t*>(codes)[w];
    const __half* p = params + (r * (cols / group) + g) * 2;
    const float scale = __half2float(p[0]);
    const float minimum = __half2float(p[1]);
    T* dst = out + r * cols + group * g + j;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t byte = (word >> (8 * i)) & 0xFFu;
      dst[i] = FromFloat<T>(__fadd_rn(__fmul_rn(static_cast<float>(byte & 0xFu), scale), minimum));
      dst[half + i] =
          FromFloat<T>(__fadd_rn(__fmul_rn(static_cast<float>(byte >> 4), scale), minimum));
    }
  }
}

// ---- launchers ----

// out[rows, cols] (of type `type`: fp32, fp16 or bf16) = the expanded weight in groups of `group`
// (32 or 64). codes 4-byte aligned; all pointers device memory.
inline cudaError_t ExpandWeightQ4(const uint8_t* codes, const __half* params, int64_t rows,
                                  int cols, int group, ElemType type, void* out,
                                  cudaStream_t stream) {
  if (group != 32 && group != 64) return cudaErrorInvalidValue;
  if (cols <= 0 || cols % group != 0 || rows < 0) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(codes) % 4 != 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned grid = GridFor(rows * (cols / 8), 256);
  switch (type) {
    case ElemType::kF32:
      ExpandWeightQ4Kernel<float>
          <<<grid, 256, 0, stream>>>(codes, params, rows, cols, group, static_cast<float*>(out));
      break;
    case ElemType::kF16:
      ExpandWeightQ4Kernel<__half>
          <<<grid, 256, 0, stream>>>(codes, params, rows, cols, group, static_cast<__half*>(out));
      break;
    case ElemType::kBF16:
      ExpandWeightQ4Kernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(
          codes, params, rows, cols, group, static_cast<__nv_bfloat16*>(out));
      break;
  }
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
