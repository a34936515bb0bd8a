// STRATA_CUDA_CHECK / STRATA_CUBLAS_CHECK: a CUDA or cuBLAS error is a broken invariant (a bug, a
// lost device, an exhausted GPU), never input a user can get wrong, so it aborts with file:line and
// the library's own message. Internal to src/backend/cuda (and its tests and benchmarks).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define STRATA_CUDA_CHECK(expr)                                                      \
  do {                                                                               \
    const cudaError_t strata_cuda_err_ = (expr);                                     \
    if (strata_cuda_err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: CUDA error %s (%s) in %s\n", __FILE__, __LINE__,  \
                   cudaGetErrorName(strata_cuda_err_),                               \
                   cudaGetErrorString(strata_cuda_err_), #expr);                     \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#define STRATA_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                   \
    const cublasStatus_t strata_cublas_st_ = (expr);                                     \
    if (strata_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                                    \
      std::fprintf(stderr, "%s:%d: cuBLAS error %s in %s\n", __FILE__, __LINE__,         \
                   cublasGetStatusString(strata_cublas_st_), #expr);                     \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
