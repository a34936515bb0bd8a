// MedianMs: the median device time of a piece of GPU work, for benchmarks and `strata profile`.
// Internal to src/backend/cuda (and its benchmarks and the profile's device probes).
#pragma once

#include <algorithm>
#include <vector>

#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_resources.h"

namespace strata {

// Median milliseconds of `reps` calls of `fn` (each queueing its work on `stream`), timed with
// device events, after `warmup` untimed calls.
template <typename Fn>
double MedianMs(const CudaStream& stream, int warmup, int reps, Fn fn) {
  for (int i = 0; i < warmup; ++i) fn();
  CudaEvent start(/*timing=*/true), stop(/*timing=*/true);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    start.Record(stream.get());
    fn();
    stop.Record(stream.get());
    stop.Synchronize();
    ms.push_back(stop.ElapsedMsSince(start));
  }
  STRATA_CUDA_CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace strata
