// Embedding lookup: out[i, :] = table[ids[i], :] (or added to out, for OPT's learned positions),
// widened to fp32 and stored in the activations' type (fp32, fp16 or bf16; a sum rounded once).
// CUDA twin of the CPU backend's Embed / AddPositionEmbedding.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

// One block per looked-up row; threads stride over the hidden dimension (coalesced both ways).
template <typename T>
__global__ void EmbedKernel(const void* table, ElemType type, int64_t hidden, const int32_t* ids,
                            bool accumulate, T* out) {
  const int64_t row = ids[blockIdx.x];
  T* dst = out + static_cast<int64_t>(blockIdx.x) * hidden;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    const float v = LoadAsFloat(table, type, row * hidden + d);
    dst[d] = FromFloat<T>(accumulate ? AsFloat(dst[d]) + v : v);
  }
}

// ---- launchers ----

// out[n, hidden] (of `out_type`) = table[ids[i]] rows (of `type`; accumulate: out += those rows).
// ids and out are device memory. REQUIRES: every id in [0, rows of table); n < 2^31.
inline cudaError_t Embed(const void* table, ElemType type, int64_t hidden, const int32_t* ids,
                         int n, bool accumulate, ElemType out_type, void* out,
                         cudaStream_t stream) {
  if (n <= 0 || hidden <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(out_type, T, {
    EmbedKernel<T>
        <<<n, 256, 0, stream>>>(table, type, hidden, ids, accumulate, static_cast<T*>(out));
  });
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
