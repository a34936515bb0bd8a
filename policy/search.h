// Policy search: the plan with the highest predicted throughput that fits the machine.
//
// For every allowed combination of weight compression, cache compression and CPU attention, and
// every block shape (gpu batch sizes and numbers of gpu batches on a 1, 2, 3, 4, 6, 8, 12, ...
// grid, block no larger than the job), a linear program (policy/lp_placement.h) places weights,
// KV cache and activations; its fractions are rounded to the whole percents the executor places,
// nudged until the exact accounting (policy/memory_accounting.h) fits, and scored by the cost
// model. A scan along either batch dimension ends when the LP finds no feasible placement
// (memory only grows with the block) or after the LP's throughput has fallen twice in a row.
// Thread-compatible; a search takes well under a second (docs/PERFORMANCE.md).
#pragma once

#include <vector>

#include "policy/cost_model.h"
#include "policy/hardware_spec.h"
#include "policy/memory_accounting.h"
#include "policy/model_spec.h"
#include "policy/plan.h"
#include "policy/workload.h"
#include "src/core/status.h"

namespace strata {

// A plan with its memory, whether that fits, and its predicted cost.
struct PlanEvaluation {
  Plan plan;
  MemoryPlan memory;
  Status fits;  // ok, or CheckFits' ResourceExhausted
  CostEstimate cost;
};

// Accounts and predicts one plan (whether or not it fits). Errors are those of AccountMemory and
// HardwareSpec::Validate.
Result<PlanEvaluation> EvaluatePlan(const ModelSpec& model, const Workload& workload,
                                    const Plan& plan, const HardwareSpec& hardware);

struct SearchOptions {
  bool allow_compress_weight = true;  // always, for a model with q4_weights
  bool allow_compress_cache = true;
  bool allow_cpu_attention = true;
  // The format of the plans with the 4-bit cache (policy/plan.h): how keys are stored and the
  // tokens kept exact, whose fp32 rows take GPU memory. Default: a plan's.
  CacheKeys cache_keys = Plan{}.cache_keys;
  int cache_sink = kDefaultCacheSink;
  int cache_window = kDefaultCacheWindow;
  int max_gpu_batch_size = 4096;
  int64_t max_block_size = 65536;  // for open-ended jobs (num_prompts 0)
  int alternatives = 4;            // how many runners-up to return
};

struct SearchResult {
  PlanEvaluation best;
  // The best plan of each other combination of compression and CPU attention, fastest first.
  std::vector<PlanEvaluation> alternatives;
  int lps_solved = 0;
  double elapsed_s = 0;  // wall time of the search
};

// ResourceExhausted when no plan fits, with the reason the smallest plan (one sequence, every
// family pushed as far from the GPU as the search may) does not fit.
Result<SearchResult> SearchPlan(const ModelSpec& model, const Workload& workload,
                                const HardwareSpec& hardware, const SearchOptions& options);

}  // namespace strata
