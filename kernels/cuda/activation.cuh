// Element-wise MLP activations in place, over fp32, fp16 or bf16 activations with fp32 math. CUDA
// twins of kernels/cpu/activation.h: same names, same formulas (exact GELU with erf, SiLU with the
// full-precision exp); a half type rounds only the result it stores.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

template <typename T>
__global__ void ReluKernel(T* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = AsFloat(x[i]);
    x[i] = FromFloat<T>(v > 0.0f ? v : 0.0f);
  }
}

template <typename T>
__global__ void GeluKernel(T* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = AsFloat(x[i]);
    x[i] = FromFloat<T>(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

template <typename T>
__global__ void SiluMulKernel(T* gate, const T* up, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = AsFloat(gate[i]);
    gate[i] = FromFloat<T>(g / (1.0f + expf(-g)) * AsFloat(up[i]));
  }
}

// ---- launchers ----

// x[i] = max(x[i], 0) for the n elements of `type` at x.
inline cudaError_t Relu(ElemType type, void* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(
      type, T, { ReluKernel<T><<<GridFor(n, 256), 256, 0, stream>>>(static_cast<T*>(x), n); });
  return cudaGetLastError();
}

// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), as OPT's "gelu".
inline cudaError_t Gelu(ElemType type, void* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(
      type, T, { GeluKernel<T><<<GridFor(n, 256), 256, 0, stream>>>(static_cast<T*>(x), n); });
  return cudaGetLastError();
}

// gate[i] = silu(gate[i]) * up[i] — the SwiGLU of the Llama MLP; both of `type`.
inline cudaError_t SiluMul(ElemType type, void* gate, const void* up, int64_t n,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(type, T, {
    SiluMulKernel<T>
        <<<GridFor(n, 256), 256, 0, stream>>>(static_cast<T*>(gate), static_cast<const T*>(up), n);
  });
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
