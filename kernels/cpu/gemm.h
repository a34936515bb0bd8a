// GEMM on the CPU: the one op that dominates the forward pass. Backed by BLAS (OpenBLAS), whose
// own threads parallelise it.
#pragma once

namespace strata::kernels::cpu {

// C[M, N] (row stride ldc) = A[M, K] * B[N, K]^T (+ C when accumulate). B is a Linear weight in
// its stored [out, in] layout, so no transposed copy is ever made.
void GemmNT(int m, int n, int k, const float* a, const float* b, float* c, int ldc, bool accumulate);

}  // namespace strata::kernels::cpu
