// How many CPU threads the kernels use (OpenMP loops and BLAS alike).
#pragma once

namespace strata::kernels::cpu {

// n > 0 sets the count; n == 0 keeps the default (all cores).
void SetCpuThreads(int n);
int CpuThreads();

}  // namespace strata::kernels::cpu
