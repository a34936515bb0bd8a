// The error an fp32 GELU may make, for the tests that hold the CPU and CUDA GELUs to fp64
// (gelu_bound_test.cc, elementwise_ops_test.cc, cuda_backend_test.cc). No CUDA header: the CPU
// tests use it too.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace strata::testing {

// |got - ref| <= GeluErrorBound(x, ref) for got = fp32 0.5 x (1 + erf(x / sqrt 2)) and ref its
// fp64 value, with eps = 2^-23:
//   atol = 2 eps |x|. The sum 1 + erf(.) has terms up to 1, so its absolute error does not
//     shrink with the result: erff within 2 ulp (CUDA's documented bound; glibc's is 1) is eps,
//     the rounded argument x / sqrt 2 moves erf by at most 0.25 eps, the addition by 0.5 eps;
//     1.75 eps in all, times 0.5 |x|, doubled for margin. Along GELU's negative tail the sum
//     cancels (x = -3.25: 1 + erf = 1.2e-3), so the relative error grows without bound there
//     (2.3e-5 at x = -3.25) and a relative bound alone fails a correct formula (issue 28).
//   rtol = 4 eps: the final product's rounding (eps / 2), with margin.
// Still tight: the tanh approximation misses it on half of [-12, 6], a wrong element by far
// (gelu_bound_test.cc).
inline double GeluErrorBound(double x, double ref) {
  const double eps = std::numeric_limits<float>::epsilon();
  return 2.0 * eps * std::abs(x) + 4.0 * eps * std::abs(ref);
}

// The largest |got[i] - ref[i]| / (scale * GeluErrorBound(x[i], ref[i])) and its index in *at:
// at most 1 when every element is within the bound. scale 2 compares two fp32 GELUs (each
// within one bound of the fp64 value). An error where the bound is 0 (x = 0) counts as infinite,
// a NaN as NaN (the first one).
template <typename Ref, typename Got>
double WorstGeluError(const std::vector<float>& x, const std::vector<Ref>& ref,
                      const std::vector<Got>& got, double scale, size_t* at) {
  double worst = 0.0;
  *at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    const double bound = scale * GeluErrorBound(x[i], static_cast<double>(ref[i]));
    const double ratio = err == 0.0 ? 0.0 : bound > 0.0 ? err / bound : INFINITY;
    if (std::isnan(ratio)) {
      *at = i;
      return ratio;
    }
    if (ratio > worst) {
      worst = ratio;
      *at = i;
    }
  }
  return worst;
}

// 0.5 x (1 + erf(x / sqrt 2)) in fp64 for each x.
inline std::vector<double> GeluFp64(const std::vector<float>& x) {
  std::vector<double> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    ref[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }
  return ref;
}

}  // namespace strata::testing
