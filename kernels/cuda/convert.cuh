// Element type conversions on the device: fp32 activations rounded to fp16/bf16 for a tensor-core
// GEMM, and fp16/bf16 weights widened to fp32 (exact). Round to nearest even everywhere.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

__global__ void FloatToHalfKernel(const float* x, int64_t n, ElemType to, uint16_t* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = to == ElemType::kF16 ? __half_as_ushort(__float2half_rn(x[i]))
                                : __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
  }
}

__global__ void ToFloatKernel(const void* x, ElemType from, int64_t n, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = LoadAsFloat(x, from, i);
  }
}

// ---- launchers ----

// y[i] = x[i] rounded to `to` (kF16 or kBF16), as raw 16-bit patterns.
inline cudaError_t FloatToHalf(const float* x, int64_t n, ElemType to, uint16_t* y,
                               cudaStream_t stream) {
  if (to == ElemType::kF32) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  FloatToHalfKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, n, to, y);
  return cudaGetLastError();
}

// y[i] = float(x[i]) for x of any ElemType.
inline cudaError_t ToFloat(const void* x, ElemType from, int64_t n, float* y,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ToFloatKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, from, n, y);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
