// How many CPU threads the kernels use (their OpenMP loops).
#pragma once

namespace strata::kernels::cpu {

// n > 0 sets the count; n == 0 keeps the default (all cores).
void SetCpuThreads(int n);
int CpuThreads();

}  // namespace strata::kernels::cpu
