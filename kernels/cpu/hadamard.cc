#include "kernels/cpu/hadamard.h"

#include <cmath>

namespace strata::kernels::cpu {

void HadamardRotate(float* x, long rows, int dim) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(dim));
  for (long r = 0; r < rows; ++r) {
    float* v = x + r * dim;
    for (int len = 1; len < dim; len <<= 1) {
      for (int i = 0; i < dim; i += 2 * len) {
        for (int j = i; j < i + len; ++j) {
          const float a = v[j];
          const float b = v[j + len];
          v[j] = a + b;
          v[j + len] = a - b;
        }
      }
    }
    for (int i = 0; i < dim; ++i) v[i] *= norm;
  }
}

}  // namespace strata::kernels::cpu
