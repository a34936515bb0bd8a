#include "src/backend/cuda/gemm.h"

#include <cublas_v2.h>

#include "src/backend/cuda/cuda_check.h"
#include "src/core/check.h"

namespace strata {

void GemmNT(const CublasHandle& handle, int m, int n, int k, kernels::cuda::ElemType type,
            const void* a, const void* b, float* c, int ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  const cudaDataType_t in_type = type == kernels::cuda::ElemType::kF32   ? CUDA_R_32F
                                 : type == kernels::cuda::ElemType::kF16 ? CUDA_R_16F
                                                                         : CUDA_R_16BF;
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  // cuBLAS is column-major: row-major C[m, n] is column-major C^T[n, m] = B A^T, with B[n, k]
  // row-major read as a transposed column-major [k, n] and A[m, k] as a column-major [k, m].
  STRATA_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b,
                                   in_type, k, a, in_type, k, &beta, c, CUDA_R_32F, ldc,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void GemmNTHalfOut(const CublasHandle& handle, int m, int n, int k, kernels::cuda::ElemType type,
                   const void* a, const void* b, void* c, int ldc) {
  STRATA_CHECK(type != kernels::cuda::ElemType::kF32);
  if (m == 0 || n == 0) return;
  const cudaDataType_t t = type == kernels::cuda::ElemType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  STRATA_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, t,
                                   k, a, t, k, &beta, c, t, ldc, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

}  // namespace strata
