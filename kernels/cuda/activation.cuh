// Element-wise MLP activations, fp32, in place. CUDA twins of kernels/cpu/activation.h: same
// names, same formulas (exact GELU with erf, SiLU with the full-precision exp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

__global__ void ReluKernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
}

__global__ void GeluKernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

__global__ void SiluMulKernel(float* gate, const float* up, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// ---- launchers ----

inline cudaError_t Relu(float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, n);
  return cudaGetLastError();
}

// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), as OPT's "gelu".
inline cudaError_t Gelu(float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GeluKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, n);
  return cudaGetLastError();
}

// gate[i] = silu(gate[i]) * up[i] — the SwiGLU of the Llama MLP.
inline cudaError_t SiluMul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SiluMulKernel<<<GridFor(n, 256), 256, 0, stream>>>(gate, up, n);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
