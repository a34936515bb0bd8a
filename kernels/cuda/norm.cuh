// LayerNorm and RMSNorm over the last dimension, one thread block per row, over fp32, fp16 or bf16
// activations: statistics and arithmetic in fp32 (fp32 weights), only y rounded to its type. CUDA
// twins of kernels/cpu/norm.h: same names, same contracts.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

template <int kThreads>
__device__ float BlockSum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();
  return total;
}

// y may be x: each thread reads an element of its row before it writes that element back.
template <typename T, int kThreads>
__global__ void RmsNormKernel(const T* x, const float* weight, float eps, int dim, T* y) {
  const T* xr = x + static_cast<long>(blockIdx.x) * dim;
  T* yr = y + static_cast<long>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    const float v = AsFloat(xr[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(BlockSum<kThreads>(ss) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    yr[i] = FromFloat<T>(weight[i] * (AsFloat(xr[i]) * inv));
  }
}

template <typename T, int kThreads>
__global__ void LayerNormKernel(const T* x, const float* weight, const float* bias, float eps,
                                int dim, T* y) {
  const T* xr = x + static_cast<long>(blockIdx.x) * dim;
  T* yr = y + static_cast<long>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) s += AsFloat(xr[i]);
  const float mean = BlockSum<kThreads>(s) / dim;
  float var = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    const float c = AsFloat(xr[i]) - mean;
    var += c * c;
  }
  const float inv = rsqrtf(BlockSum<kThreads>(var) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    yr[i] = FromFloat<T>((AsFloat(xr[i]) - mean) * inv * weight[i] + (bias ? bias[i] : 0.0f));
  }
}

// ---- launchers ----

// y[rows, dim] = RMSNorm of x's rows times weight[dim] (fp32); x and y of `type`, y may be x.
inline cudaError_t RmsNorm(ElemType type, const void* x, const float* weight, float eps, int rows,
                           int dim, void* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(type, T, {
    RmsNormKernel<T, 256>
        <<<rows, 256, 0, stream>>>(static_cast<const T*>(x), weight, eps, dim, static_cast<T*>(y));
  });
  return cudaGetLastError();
}

// y[rows, dim] = LayerNorm of x's rows with weight and bias[dim] (fp32; bias may be null); x and
// y of `type`, y may be x.
inline cudaError_t LayerNorm(ElemType type, const void* x, const float* weight, const float* bias,
                             float eps, int rows, int dim, void* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(type, T, {
    LayerNormKernel<T, 256><<<rows, 256, 0, stream>>>(static_cast<const T*>(x), weight, bias, eps,
                                                      dim, static_cast<T*>(y));
  });
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
