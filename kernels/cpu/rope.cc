#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>

namespace strata::kernels::cpu {

void RopeInverseFrequencies(const RopeParams& p, float* inv_freq) {
  const int half = p.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(p.head_dim);
    inv_freq[i] = 1.0f / std::pow(p.theta, exponent);
  }
  if (p.scaling == RopeScalingKind::kLinear) {
    for (int i = 0; i < half; ++i) inv_freq[i] /= p.factor;
  } else if (p.scaling == RopeScalingKind::kLlama3) {
    // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, a smooth ramp between.
    const float low_wavelen = p.original_max_positions / p.low_freq_factor;
    const float high_wavelen = p.original_max_positions / p.high_freq_factor;
    for (int i = 0; i < half; ++i) {
      const float wavelen = 2.0f * static_cast<float>(M_PI) / inv_freq[i];
      if (wavelen > low_wavelen) {
        inv_freq[i] /= p.factor;
      } else if (wavelen >= high_wavelen) {
        const float smooth = (p.original_max_positions / wavelen - p.low_freq_factor) /
                             (p.high_freq_factor - p.low_freq_factor);
        inv_freq[i] = (1.0f - smooth) * inv_freq[i] / p.factor + smooth * inv_freq[i];
      }
    }
  } else if (p.scaling == RopeScalingKind::kFactors) {
    for (int i = 0; i < half; ++i) inv_freq[i] /= p.freq_factors[i];
  } else if (p.scaling == RopeScalingKind::kYarn) {
    // transformers' _compute_yarn_parameters: the dimension at which a frequency turns
    // `rotations` times over the original context (in double), and a ramp in fp32 from the
    // dimensions kept (extrapolated) to those divided by factor (interpolated).
    const auto correction_dim = [&](double rotations) {
      return p.head_dim * std::log(p.original_max_positions / (rotations * 2 * M_PI)) /
             (2 * std::log(static_cast<double>(p.theta)));
    };
    double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
    if (p.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, p.head_dim - 1.0);
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const float pos_freq = std::pow(p.theta, static_cast<float>(2 * i) / p.head_dim);
      const float ramp = std::clamp(
          (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
          1.0f);
      const float kept = 1.0f - ramp;
      inv_freq[i] = 1.0f / (p.factor * pos_freq) * (1.0f - kept) + 1.0f / pos_freq * kept;
    }
  }
}

void ApplyRope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
               const float* inv_freq) {
  const int half = head_dim / 2;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (int h = 0; h < heads; ++h) {
        float* v = x + (static_cast<long>(t) * heads + h) * head_dim;
        const float a = v[i];
        const float b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

}  // namespace strata::kernels::cpu
