#include "kernels/cpu/norm.h"

#include <cmath>

namespace strata::kernels::cpu {

void LayerNorm(const float* x, const float* weight, const float* bias, float eps, int rows, int dim,
               float* y) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<long>(r) * dim;
    float* yr = y + static_cast<long>(r) * dim;
    double mean = 0;
    for (int i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    double var = 0;
    for (int i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= dim;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int i = 0; i < dim; ++i) yr[i] = (xr[i] - m) * inv * weight[i] + (bias ? bias[i] : 0.0f);
  }
}

void RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* y) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<long>(r) * dim;
    float* yr = y + static_cast<long>(r) * dim;
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
    for (int i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

}  // namespace strata::kernels::cpu
