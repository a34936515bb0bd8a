// Residual and bias additions over fp32, fp16 or bf16 activations, summed in fp32 and rounded
// once: x[i] += y[i], and y[row, :] += bias[:] (an fp32 bias) after a GEMM.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

template <typename T>
__global__ void AddKernel(T* x, const T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = FromFloat<T>(AsFloat(x[i]) + AsFloat(y[i]));
  }
}

template <typename T>
__global__ void AddBiasKernel(T* y, const float* bias, int64_t rows, int cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = FromFloat<T>(AsFloat(y[i]) + bias[i % cols]);
  }
}

// ---- launchers ----

// x[i] += y[i] for i < n, both of `type`.
inline cudaError_t Add(ElemType type, void* x, const void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(type, T, {
    AddKernel<T>
        <<<GridFor(n, 256), 256, 0, stream>>>(static_cast<T*>(x), static_cast<const T*>(y), n);
  });
  return cudaGetLastError();
}

// y[r, c] += bias[c] for a row-major y[rows, cols] of `type` and an fp32 bias.
inline cudaError_t AddBias(ElemType type, void* y, const float* bias, int64_t rows, int cols,
                           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(type, T, {
    AddBiasKernel<T>
        <<<GridFor(rows * cols, 256), 256, 0, stream>>>(static_cast<T*>(y), bias, rows, cols);
  });
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
