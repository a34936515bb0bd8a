// Residual and bias additions, fp32: x[i] += y[i], and y[row, :] += bias[:] after a GEMM.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

__global__ void AddBiasKernel(float* y, const float* bias, int64_t rows, int cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += bias[i % cols];
  }
}

// ---- launchers ----

// x[i] += y[i] for i < n.
inline cudaError_t Add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

// y[r, c] += bias[c] for a row-major y[rows, cols].
inline cudaError_t AddBias(float* y, const float* bias, int64_t rows, int cols,
                           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  AddBiasKernel<<<GridFor(rows * cols, 256), 256, 0, stream>>>(y, bias, rows, cols);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
