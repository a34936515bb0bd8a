// Element type conversions on the device between fp32, fp16 and bf16: activations rounded to a
// half type for a tensor-core GEMM or widened to fp32 for a kernel that reads fp32, weights widened
// to fp32 or rounded to the activations' type. Widening is exact; rounding is to nearest even.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// ---- kernels ----

template <typename From, typename To>
__global__ void ConvertKernel(const From* x, int64_t n, To* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = FromFloat<To>(AsFloat(x[i]));
  }
}

// ---- launchers ----

// y[i] = x[i] as `to`, for the n elements of `from` at x (from == to copies). x and y do not
// overlap.
inline cudaError_t Convert(const void* x, ElemType from, int64_t n, ElemType to, void* y,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  STRATA_DISPATCH_ELEM_TYPE(from, From, {
    STRATA_DISPATCH_ELEM_TYPE(to, To, {
      ConvertKernel<From, To><<<GridFor(n, 256), 256, 0, stream>>>(static_cast<const From*>(x), n,
                                                                   static_cast<To*>(y));
    });
  });
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
