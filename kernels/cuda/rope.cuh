// Rotary position embedding, rotate-half layout (element i of a head pairs with i + head_dim/2),
// over fp32, fp16 or bf16 activations, rotated in fp32 and rounded once. CUDA twin of
// kernels/cpu/rope.h's ApplyRope. The inverse frequencies (with any llama3 or linear scaling) are
// computed on the host by kernels::cpu::RopeInverseFrequencies and passed in, so both backends
// rotate by bit-identical angles; only sin/cos rounding differs (a few ulp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

// One thread per (token, frequency): the angle and its sin/cos are computed once and applied to
// every head of the token; consecutive threads touch consecutive elements of a head.
template <typename T>
__global__ void ApplyRopeKernel(T* x, const int32_t* positions, int tokens, int heads, int head_dim,
                                const float* inv_freq) {
  const int half = head_dim / 2;
  const int64_t n = static_cast<int64_t>(tokens) * half;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < n;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(w / half);
    const int i = static_cast<int>(w % half);
    const float angle = static_cast<float>(positions[t]) * inv_freq[i];
    float s, c;
    sincosf(angle, &s, &c);
    for (int h = 0; h < heads; ++h) {
      T* v = x + (static_cast<int64_t>(t) * heads + h) * head_dim;
      const float a = AsFloat(v[i]);
      const float b = AsFloat(v[i + half]);
      v[i] = FromFloat<T>(a * c - b * s);
      v[i + half] = FromFloat<T>(b * c + a * s);
    }
  }
}

// ---- launchers ----

// Rotates x[tokens, heads, head_dim] (of `type`) in place; token t sits at position
// positions[t]. positions[tokens] and inv_freq[head_dim / 2] are device memory. REQUIRES: head_dim
// even.
inline cudaError_t ApplyRope(ElemType type, void* x, const int32_t* positions, int tokens,
                             int heads, int head_dim, const float* inv_freq, cudaStream_t stream) {
  if (head_dim % 2 != 0) return cudaErrorInvalidValue;
  if (tokens <= 0 || heads <= 0 || head_dim == 0) return cudaSuccess;
  const int64_t n = static_cast<int64_t>(tokens) * (head_dim / 2);
  STRATA_DISPATCH_ELEM_TYPE(type, T, {
    ApplyRopeKernel<T><<<GridFor(n, 128), 128, 0, stream>>>(static_cast<T*>(x), positions, tokens,
                                                            heads, head_dim, inv_freq);
  });
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
