// GEMM on the GPU through cuBLAS: the CUDA twin of kernels/cpu/gemm.h's GemmNT. Which of these a
// Linear runs, and the scratch that takes, is ChooseGemm's (cuda_scratch.h: plain C++, tested
// without a GPU).
#pragma once

#include "kernels/cuda/params.h"
#include "src/backend/cuda/cuda_resources.h"

namespace strata {

// C[m, n] (row stride ldc, fp32) = A[m, k] * B[n, k]^T (+ C when accumulate), on the handle's
// stream. A and B are device matrices of the same element type `type` (fp32, fp16 or bf16), B a
// Linear weight in its stored [out, in] layout; products accumulate in fp32 (never TF32).
// REQUIRES: ldc >= n; cuBLAS succeeds (aborts otherwise).
void GemmNT(const CublasHandle& handle, int m, int n, int k, kernels::cuda::ElemType type,
            const void* a, const void* b, float* c, int ldc, bool accumulate);

// The same with C in the input type: C[m, n] (row stride ldc, fp16 or bf16 as `type`) =
// A[m, k] * B[n, k]^T, accumulated in fp32 and rounded once (PyTorch's F.linear on fp16). The
// output type the plans use on a GPU: half the bytes of an fp32 C and cuBLAS's fastest kernels.
// REQUIRES: type is kF16 or kBF16; ldc >= n; cuBLAS succeeds (aborts otherwise).
void GemmNTHalfOut(const CublasHandle& handle, int m, int n, int k, kernels::cuda::ElemType type,
                   const void* a, const void* b, void* c, int ldc);

}  // namespace strata
