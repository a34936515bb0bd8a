// FlexGen's published runs on its T4 machine (../shared/docs/ANCHORS.md): prompt 512, generation
// 32, the hand policies of its benchmark suite (benchmark/flexgen/bench_suite.py) and its
// published throughputs. Shared by the comparison test and the table in docs/PERFORMANCE.md.
#pragma once

#include <string>
#include <vector>

#include "policy/plan.h"

namespace strata::testing {

struct FlexGenCase {
  std::string model;  // configs/models preset
  bool compressed;    // FlexGen's "4-bit" column
  Plan hand;          // FlexGen's hand policy as a strata plan
  double published_tokens_per_s;
};

inline Plan HandPlan(std::vector<int> percent, int gbs, int nb, bool cpu_attention,
                     bool compress_weight, bool compress_cache, bool overlap) {
  Plan p;
  p.weight_gpu_percent = percent[0];
  p.weight_cpu_percent = percent[1];
  p.cache_gpu_percent = percent[2];
  p.cache_cpu_percent = percent[3];
  p.activation_gpu_percent = percent[4];
  p.activation_cpu_percent = percent[5];
  p.gpu_batch_size = gbs;
  p.num_gpu_batches = nb;
  p.cpu_attention = cpu_attention;
  p.compress_weight = compress_weight;
  p.compress_cache = compress_cache;
  p.cache_keys = CacheKeys::kPlain;  // FlexGen's group-wise 4-bit scheme, no token kept exact
  p.cache_sink = p.cache_window = 0;
  p.overlap = overlap;
  return p;
}

inline std::vector<FlexGenCase> FlexGenCases() {
  return {
      {"opt-6.7b", false, HandPlan({100, 0, 100, 0, 100, 0}, 2, 1, false, false, false, false),
       25.26},
      {"opt-30b", false, HandPlan({20, 80, 0, 100, 0, 100}, 48, 3, true, false, false, true), 7.32},
      {"opt-175b", false, HandPlan({0, 50, 0, 0, 0, 100}, 32, 8, true, false, false, true), 0.69},
      {"opt-6.7b", true, HandPlan({100, 0, 100, 0, 100, 0}, 72, 1, false, true, true, false),
       29.12},
      {"opt-30b", true, HandPlan({0, 100, 0, 100, 0, 100}, 64, 8, false, false, true, true), 8.38},
      {"opt-175b", true, HandPlan({0, 100, 0, 100, 0, 100}, 48, 3, false, true, true, true), 1.12},
  };
}

}  // namespace strata::testing
