#include "kernels/cpu/gemm.h"

#include <cblas.h>

namespace strata::kernels::cpu {

void GemmNT(int m, int n, int k, const float* a, const float* b, float* c, int ldc,
            bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k,
              accumulate ? 1.0f : 0.0f, c, ldc);
}

}  // namespace strata::kernels::cpu
