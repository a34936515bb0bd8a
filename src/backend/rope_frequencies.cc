#include "kernels/cpu/rope.h"
#include "src/backend/shapes.h"

namespace strata {

void RopeInverseFrequencies(const RopeSpec& spec, float* inv_freq) {
  namespace k = kernels::cpu;
  k::RopeParams p;
  p.head_dim = spec.head_dim;
  p.theta = spec.theta;
  switch (spec.scaling) {
    case RopeSpec::Scaling::kNone: p.scaling = k::RopeScalingKind::kNone; break;
    case RopeSpec::Scaling::kLinear: p.scaling = k::RopeScalingKind::kLinear; break;
    case RopeSpec::Scaling::kLlama3: p.scaling = k::RopeScalingKind::kLlama3; break;
    case RopeSpec::Scaling::kFactors: p.scaling = k::RopeScalingKind::kFactors; break;
    case RopeSpec::Scaling::kYarn: p.scaling = k::RopeScalingKind::kYarn; break;
  }
  p.factor = spec.factor;
  p.low_freq_factor = spec.low_freq_factor;
  p.high_freq_factor = spec.high_freq_factor;
  p.original_max_positions = spec.original_max_positions;
  p.freq_factors = spec.freq_factors;
  p.beta_fast = spec.beta_fast;
  p.beta_slow = spec.beta_slow;
  p.truncate = spec.truncate;
  k::RopeInverseFrequencies(p, inv_freq);
}

}  // namespace strata
