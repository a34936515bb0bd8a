// Key smoothing of the 4-bit KV cache on the device: CUDA twins of kernels/cpu/kv_q4_smooth.h
// (FitKeySmoothing, SmoothKey and ScaleQuery) over a step's token-major rows. The fit sums in fp64
// in the CPU's order (tokens in order per channel, then the channels' logs in order), so both
// sides agree to the final rounding to fp32; smoothing and scaling are single correctly rounded
// fp32 operations, bit for bit the CPU's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

namespace kv_q4_smooth {

inline constexpr int kFitThreads = 128;
// Shared memory of the fit: one fp64 root per channel.
inline constexpr int kFitMaxHeadDim = 4096;

// ---- kernels ----

// One block per (sequence, KV head) = blockIdx.x; each thread fits channels c, c + blockDim.x ...
// over the sequence's real tokens, then thread 0 takes the geometric mean of the roots.
__global__ void __launch_bounds__(kFitThreads)
    FitKeySmoothingKernel(int num_kv_heads, int head_dim, int tokens, int first_slot,
                          const int* start, const float* k_rows, float* mean, float* scale) {
  extern __shared__ double s_root[];  // [head_dim]
  __shared__ double s_norm;
  const int b = blockIdx.x / num_kv_heads;
  const int h = blockIdx.x % num_kv_heads;
  const int first_real = min(max(start[b] - first_slot, 0), tokens);
  const int count = tokens - first_real;
  const int64_t stride = static_cast<int64_t>(num_kv_heads) * head_dim;
  const float* keys = k_rows + (static_cast<int64_t>(b) * tokens + first_real) * stride +
                      static_cast<int64_t>(h) * head_dim;
  float* m_out = mean + static_cast<int64_t>(blockIdx.x) * head_dim;
  float* s_out = scale + static_cast<int64_t>(blockIdx.x) * head_dim;
  if (count < 2) {  // the identity; uniform over the block
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
      m_out[c] = 0.0f;
      s_out[c] = 1.0f;
    }
    return;
  }
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    double m = 0.0;
    for (int i = 0; i < count; ++i) m += keys[i * stride + c];
    m /= static_cast<double>(count);
    double var = 0.0;
    for (int i = 0; i < count; ++i) {
      const double x = keys[i * stride + c] - m;
      var += x * x;
    }
    // sqrt(std) = var^(1/4); a constant channel gets the floor instead of a zero scale.
    s_root[c] = pow(fmax(var / static_cast<double>(count), 1e-12), 0.25);
    m_out[c] = static_cast<float>(m);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double log_sum = 0.0;
    for (int c = 0; c < head_dim; ++c) log_sum += log(s_root[c]);
    s_norm = exp(log_sum / head_dim);
  }
  __syncthreads();
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    s_out[c] = static_cast<float>(s_root[c] / s_norm);
  }
}

// k[i] = (k[i] - mean) / scale of its (sequence, KV head, channel).
__global__ void SmoothKeysKernel(int64_t n, int tokens, int token_floats, const float* mean,
                                 const float* scale, float* k_rows) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = i / token_floats / tokens * token_floats + i % token_floats;
    k_rows[i] = __fdiv_rn(__fsub_rn(k_rows[i], mean[at]), scale[at]);
  }
}

// q[i] *= scale of its (sequence, KV head of its query head, channel).
__global__ void ScaleQueriesKernel(int64_t n, int num_heads, int group, int head_dim,
                                   const float* scale, float* q) {
  const int num_kv_heads = num_heads / group;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % head_dim);
    const int head = static_cast<int>(i / head_dim % num_heads);
    const int64_t b = i / head_dim / num_heads;
    const int64_t at = (b * num_kv_heads + head / group) * head_dim + c;
    q[i] = __fmul_rn(q[i], scale[at]);
  }
}

}  // namespace kv_q4_smooth

// ---- launchers ----
//
// mean and scale are [batch, num_kv_heads, head_dim] fp32 (device memory), one channel mean and
// scale per (sequence, KV head).

// Fits mean and scale to each sequence's real keys among k_rows[batch * tokens, num_kv_heads *
// head_dim] (token-major, as a Linear writes them; token t at slot first_slot + t, real from
// slot start[b] on, start int[batch] device memory), as kernels/cpu/kv_q4_smooth.h's
// FitKeySmoothing per (sequence, KV head): fewer than 2 real tokens give the identity.
// REQUIRES: 0 < head_dim <= 4096 (else cudaErrorInvalidValue).
inline cudaError_t FitKeySmoothing(int batch, int num_kv_heads, int head_dim, int tokens,
                                   int first_slot, const int* start, const float* k_rows,
                                   float* mean, float* scale, cudaStream_t stream) {
  if (head_dim <= 0 || head_dim > kv_q4_smooth::kFitMaxHeadDim || tokens < 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t blocks = static_cast<int64_t>(batch) * num_kv_heads;
  if (blocks <= 0) return cudaSuccess;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const size_t smem = sizeof(double) * static_cast<size_t>(head_dim);
  kv_q4_smooth::FitKeySmoothingKernel<<<static_cast<unsigned>(blocks), kv_q4_smooth::kFitThreads,
                                        smem, stream>>>(num_kv_heads, head_dim, tokens, first_slot,
                                                        start, k_rows, mean, scale);
  return cudaGetLastError();
}

// k_rows[batch * tokens, num_kv_heads * head_dim] (token-major) = (k - mean) / scale, in place.
inline cudaError_t SmoothKeys(int batch, int tokens, int num_kv_heads, int head_dim,
                              const float* mean, const float* scale, float* k_rows,
                              cudaStream_t stream) {
  const int64_t token_floats = static_cast<int64_t>(num_kv_heads) * head_dim;
  const int64_t n = static_cast<int64_t>(batch) * tokens * token_floats;
  if (n <= 0) return cudaSuccess;
  if (token_floats > 0x7FFFFFFF) return cudaErrorInvalidValue;
  kv_q4_smooth::SmoothKeysKernel<<<GridFor(n, 256), 256, 0, stream>>>(
      n, tokens, static_cast<int>(token_floats), mean, scale, k_rows);
  return cudaGetLastError();
}

// q[batch, num_heads, head_dim] *= scale of its KV head (query head h reads KV head
// h / (num_heads / num_kv_heads)), in place. REQUIRES: num_heads a multiple of num_kv_heads.
inline cudaError_t ScaleQueries(int batch, int num_heads, int num_kv_heads, int head_dim,
                                const float* scale, float* q, cudaStream_t stream) {
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(batch) * num_heads * head_dim;
  if (n <= 0) return cudaSuccess;
  kv_q4_smooth::ScaleQueriesKernel<<<GridFor(n, 256), 256, 0, stream>>>(
      n, num_heads, num_heads / num_kv_heads, head_dim, scale, q);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
