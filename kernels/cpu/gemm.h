// GEMM on the CPU: the one op that dominates the forward pass, and the one whose rounding decides
// whether placement changes the math (docs/DESIGN.md, rule 3).
//
// A BLAS library is free to sum each element in an order that depends on the matrix shape, the
// thread count and the kernel it picks for the CPU: OpenBLAS 0.3.21 gives a row a different result
// when it is computed with other rows (Haswell and Zen kernels) or in a smaller matrix (SkylakeX
// and Cooperlake), by an ulp or so. The 4-bit KV cache turns such an ulp into another code now and
// then, and so another token, so a block cut into micro-batches did not reproduce the whole
// block's tokens on every machine. This GEMM fixes the order instead: every element
// C[i][j] = Σ_k A[i][k]·B[j][k] is summed exactly as GemmNTElement below spells it out, whatever
// m, the other rows, the thread count or the instruction set, so a row's result never depends on
// what it is batched with, and it is the same on every CPU.
#pragma once

namespace strata::kernels::cpu {

// Instruction sets of the GEMM. kAuto picks the widest one the running CPU supports (decided at
// run time with __builtin_cpu_supports); the others force a path. All give bit-identical results.
enum class GemmIsa { kAuto, kScalar, kAvx2, kAvx512 };

// True when `isa` can run on this CPU (kAuto and kScalar always can).
bool GemmIsaAvailable(GemmIsa isa);
// The path kAuto resolves to on this CPU (never kAuto).
GemmIsa ResolveGemmIsa(GemmIsa isa);
const char* GemmIsaName(GemmIsa isa);

// Lanes of the fixed summation order.
inline constexpr int kGemmLanes = 16;

// The order every path follows for one element: lane l sums a[k]·b[k] for k ≡ l (mod 16) below
// k16 = k - k % 16, in increasing k, each step one fused multiply-add from 0; the lanes fold by
// halves (l += l + 8, then + 4, + 2, + 1); the last k % 16 products are added in increasing k by
// fused multiply-add. The scalar path computes exactly this; tests hold the others to it bit for
// bit.
float GemmNTElement(int k, const float* a, const float* b);

// C[M, N] (row stride ldc) = A[M, K] * B[N, K]^T (+ C when accumulate). B is a Linear weight in
// its stored [out, in] layout, so no transposed copy is ever made. Each C[i][j] is
// GemmNTElement(k, A row i, B row j) (plus the old C[i][j], added once, when accumulate).
// REQUIRES: `isa` available. Thread-safe; uses the OpenMP thread count (kernels/cpu/threads.h).
void GemmNT(int m, int n, int k, const float* a, const float* b, float* c, int ldc, bool accumulate,
            GemmIsa isa = GemmIsa::kAuto);

}  // namespace strata::kernels::cpu
