#include "kernels/cpu/threads.h"

#include <omp.h>

namespace strata::kernels::cpu {

void SetCpuThreads(int n) {
  if (n <= 0) return;
  omp_set_num_threads(n);
}

int CpuThreads() { return omp_get_max_threads(); }

}  // namespace strata::kernels::cpu
