#include "kernels/cpu/kv_q4_smooth.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::kernels::cpu {

void FitKeySmoothing(const float* keys, long count, long stride, int head_dim, float* mean,
                     float* scale) {
  std::fill(mean, mean + head_dim, 0.0f);
  std::fill(scale, scale + head_dim, 1.0f);
  if (count < 2) return;
  std::vector<double> m(static_cast<size_t>(head_dim), 0.0);
  std::vector<double> var(static_cast<size_t>(head_dim), 0.0);
  for (long i = 0; i < count; ++i) {
    for (int c = 0; c < head_dim; ++c) m[c] += keys[i * stride + c];
  }
  for (double& x : m) x /= static_cast<double>(count);
  for (long i = 0; i < count; ++i) {
    for (int c = 0; c < head_dim; ++c) {
      const double x = keys[i * stride + c] - m[c];
      var[c] += x * x;
    }
  }
  // sqrt(std) = var^(1/4); a constant channel gets the floor instead of a zero scale.
  double log_sum = 0;
  for (int c = 0; c < head_dim; ++c) {
    var[c] = std::pow(std::max(var[c] / static_cast<double>(count), 1e-12), 0.25);
    log_sum += std::log(var[c]);
  }
  const double norm = std::exp(log_sum / head_dim);
  for (int c = 0; c < head_dim; ++c) {
    mean[c] = static_cast<float>(m[c]);
    scale[c] = static_cast<float>(var[c] / norm);
  }
}

void SmoothKey(const float* k, const float* mean, const float* scale, int head_dim, float* out) {
  for (int c = 0; c < head_dim; ++c) out[c] = (k[c] - mean[c]) / scale[c];
}

void UnsmoothKey(const float* mean, const float* scale, int head_dim, float* k) {
  for (int c = 0; c < head_dim; ++c) k[c] = k[c] * scale[c] + mean[c];
}

void ScaleQuery(const float* q, const float* scale, int head_dim, float* out) {
  for (int c = 0; c < head_dim; ++c) out[c] = q[c] * scale[c];
}

}  // namespace strata::kernels::cpu
