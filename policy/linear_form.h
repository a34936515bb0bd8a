// LinearForm: a quantity (seconds or bytes) that is affine in the nine placement fractions of a
// plan. The cost model and the memory accounting express their terms this way so that the search's
// linear program minimises exactly what the model predicts (policy/search.cc).
#pragma once

#include <array>

#include "policy/plan.h"

namespace strata {

// The placement fractions, each in [0, 1]; each family of three sums to 1.
enum Fraction {
  kWeightGpu,
  kWeightCpu,
  kWeightDisk,
  kCacheGpu,
  kCacheCpu,
  kCacheDisk,
  kActivationGpu,
  kActivationCpu,
  kActivationDisk,
  kNumFractions,
};
using Fractions = std::array<double, kNumFractions>;

// The plan's percents as fractions.
inline Fractions FractionsOf(const Plan& p) {
  return {p.weight_gpu_percent / 100.0,       p.weight_cpu_percent / 100.0,
          p.weight_disk_percent() / 100.0,    p.cache_gpu_percent / 100.0,
          p.cache_cpu_percent / 100.0,        p.cache_disk_percent() / 100.0,
          p.activation_gpu_percent / 100.0,   p.activation_cpu_percent / 100.0,
          p.activation_disk_percent() / 100.0};
}

struct LinearForm {
  double constant = 0;
  std::array<double, kNumFractions> coef{};

  double Eval(const Fractions& x) const {
    double v = constant;
    for (int i = 0; i < kNumFractions; ++i) v += coef[i] * x[i];
    return v;
  }
  // Adds `scale` times fraction i.
  LinearForm& Add(Fraction i, double scale) {
    coef[i] += scale;
    return *this;
  }
  LinearForm& operator+=(const LinearForm& o) {
    constant += o.constant;
    for (int i = 0; i < kNumFractions; ++i) coef[i] += o.coef[i];
    return *this;
  }
  LinearForm operator*(double s) const {
    LinearForm r = *this;
    r.constant *= s;
    for (double& c : r.coef) c *= s;
    return r;
  }
};

inline LinearForm operator+(LinearForm a, const LinearForm& b) { return a += b; }

}  // namespace strata
