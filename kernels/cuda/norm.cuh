// LayerNorm and RMSNorm over the last dimension, fp32, one thread block per row. CUDA twins of
// kernels/cpu/norm.h: same names, same contracts.
#pragma once

#include <cuda_runtime.h>

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

template <int kThreads>
__global__ void RmsNormKernel(const float* x, const float* weight, float eps, int dim, float* y) {
  const float* xr = x + static_cast<long>(blockIdx.x) * dim;
  float* yr = y + static_cast<long>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
  const float inv = rsqrtf(BlockSum<kThreads>(ss) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) yr[i] = weight[i] * (xr[i] * inv);
}

template <int kThreads>
__global__ void LayerNormKernel(const float* x, const float* weight, const float* bias, float eps,
                                int dim, float* y) {
  const float* xr = x + static_cast<long>(blockIdx.x) * dim;
  float* yr = y + static_cast<long>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) s += xr[i];
  const float mean = BlockSum<kThreads>(s) / dim;
  float var = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) var += (xr[i] - mean) * (xr[i] - mean);
  const float inv = rsqrtf(BlockSum<kThreads>(var) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    yr[i] = (xr[i] - mean) * inv * weight[i] + (bias ? bias[i] : 0.0f);
  }
}

// ---- launchers ----

inline cudaError_t RmsNorm(const float* x, const float* weight, float eps, int rows, int dim,
                           float* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  RmsNormKernel<256><<<rows, 256, 0, stream>>>(x, weight, eps, dim, y);
  return cudaGetLastError();
}

inline cudaError_t LayerNorm(const float* x, const float* weight, const float* bias, float eps,
                             int rows, int dim, float* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LayerNormKernel<256><<<rows, 256, 0, stream>>>(x, weight, bias, eps, dim, y);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
