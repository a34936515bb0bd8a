#include "policy/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "policy/fit_check.h"
#include "policy/lp_placement.h"

namespace strata {
namespace {

// 1, 2, 3, 4, 6, 8, 12, 16, 24, ... up to `limit`.
std::vector<int64_t> Grid(int64_t limit) {
  std::vector<int64_t> grid;
  for (int64_t p = 1; p <= limit; p *= 2) {
    grid.push_back(p);
    if (p >= 2 && p + p / 2 <= limit) grid.push_back(p + p / 2);
  }
  return grid;
}

// Whole percents nearest to the LP's fractions, rounded cumulatively so each family sums to 100.
void RoundFamily(double gpu, double cpu, int* gpu_percent, int* cpu_percent) {
  const int g = std::clamp(static_cast<int>(std::lround(100 * gpu)), 0, 100);
  const int gc = std::clamp(static_cast<int>(std::lround(100 * (gpu + cpu))), g, 100);
  *gpu_percent = g;
  *cpu_percent = gc - g;
}

// How many successive declines of the LP's throughput end a scan over a batch dimension, and
// how large a decline must be to count (smaller ones are the flat top of the curve).
constexpr int kPatience = 2;
constexpr double kDecline = 1e-3;

// The LP's throughput for a job of workload.num_prompts prompts (or one block if open-ended).
double LpTokensPerSecond(const LpPlacement& lp, const Plan& shape, const Workload& workload) {
  const int64_t block = shape.block_size();
  const int64_t prompts = workload.num_prompts > 0 ? workload.num_prompts : block;
  const int64_t blocks = (prompts + block - 1) / block;
  return double(prompts) * workload.gen_len / (blocks * lp.block_s);
}

std::optional<Tier> OverflowingTier(const MemoryPlan& m, const HardwareSpec& hw) {
  if (m.total_bytes.gpu_bytes > hw.gpu_capacity_bytes) return Tier::kGpu;
  if (m.total_bytes.cpu_bytes > hw.cpu_capacity_bytes) return Tier::kCpu;
  if (m.total_bytes.disk_bytes > hw.disk_capacity_bytes) return Tier::kDisk;
  return std::nullopt;
}

// Moves one percent point of a family away from an overflowing tier: GPU -> CPU, CPU -> disk,
// disk -> CPU. Returns false when the family has nothing on that tier.
bool MovePoint(int* gpu, int* cpu, Tier from) {
  const int disk = 100 - *gpu - *cpu;
  if (from == Tier::kGpu && *gpu > 0) {
    --*gpu;
    ++*cpu;
    return true;
  }
  if (from == Tier::kCpu && *cpu > 0) {
    --*cpu;
    return true;
  }
  if (from == Tier::kDisk && disk > 0) {
    ++*cpu;
    return true;
  }
  return false;
}

// Nudges a rounded plan, one percent point at a time, out of whatever tier overflows, choosing
// each time the move the cost model minds least. nullopt when no move is left.
std::optional<PlanEvaluation> Repair(Plan plan, const ModelSpec& model, const Workload& workload,
                                     const HardwareSpec& hw, const CostForms& forms) {
  for (int step = 0; step < 300; ++step) {
    Result<MemoryPlan> memory = AccountMemory(model, workload, plan);
    if (!memory.ok()) return std::nullopt;
    const std::optional<Tier> over = OverflowingTier(*memory, hw);
    if (!over) {
      return PlanEvaluation{plan, std::move(memory).value(), Status::Ok(),
                            CombineCost(forms, FractionsOf(plan), model, workload, plan)};
    }
    std::optional<Plan> best;
    double best_s = 0;
    for (int family = 0; family < 3; ++family) {
      Plan next = plan;
      int* g[] = {&next.weight_gpu_percent, &next.cache_gpu_percent, &next.activation_gpu_percent};
      int* c[] = {&next.weight_cpu_percent, &next.cache_cpu_percent, &next.activation_cpu_percent};
      if (!MovePoint(g[family], c[family], *over)) continue;
      const double s = CombineCost(forms, FractionsOf(next), model, workload, next).block_s;
      if (!best || s < best_s) best = next, best_s = s;
    }
    if (!best) return std::nullopt;
    plan = *best;
  }
  return std::nullopt;
}

// Rounds the LP's fractions into a plan of the given shape.
Plan RoundedPlan(const Plan& shape, const Fractions& x) {
  Plan plan = shape;
  RoundFamily(x[kWeightGpu], x[kWeightCpu], &plan.weight_gpu_percent, &plan.weight_cpu_percent);
  RoundFamily(x[kCacheGpu], x[kCacheCpu], &plan.cache_gpu_percent, &plan.cache_cpu_percent);
  RoundFamily(x[kActivationGpu], x[kActivationCpu], &plan.activation_gpu_percent,
              &plan.activation_cpu_percent);
  return plan;
}

// The best plan with the flags of `shape` over the gpu batch size x number of gpu batches grid.
// Throughput rises with the block while weight traffic amortises and falls once memory pressure
// pushes the cache to slower tiers, so each scan stops after the LP's throughput has fallen
// kPatience times in a row, or when nothing fits.
std::optional<PlanEvaluation> ScanShapes(Plan shape, const ModelSpec& model,
                                         const Workload& workload, const HardwareSpec& hw,
                                         const SearchOptions& options, int64_t max_block,
                                         int* lps_solved) {
  std::optional<PlanEvaluation> best;
  double best_gbs_tokens_per_s = 0;
  int gbs_declines = 0;
  for (int64_t gbs : Grid(std::min<int64_t>(options.max_gpu_batch_size, max_block))) {
    double best_nb_tokens_per_s = 0;
    int nb_declines = 0;
    for (int64_t nb : Grid(max_block / gbs)) {
      shape.gpu_batch_size = static_cast<int>(gbs);
      shape.num_gpu_batches = static_cast<int>(nb);
      const CostForms forms = BuildCostForms(model, workload, shape, hw);
      const LinearMemory memory = LinearMemoryOf(model, workload, shape);
      // Weights all on the GPU, or loading through the weight slots: the model differs (the
      // slots' chains), so each side has its own LP.
      double lp_tokens_per_s = 0;
      for (bool weights_load : {false, true}) {
        Result<LpPlacement> lp = SolvePlacementLp(forms, memory, hw, model.num_layers,
                                                  workload.gen_len, shape.overlap, weights_load);
        ++*lps_solved;
        if (!lp.ok()) continue;
        lp_tokens_per_s = std::max(lp_tokens_per_s, LpTokensPerSecond(*lp, shape, workload));
        std::optional<PlanEvaluation> eval =
            Repair(RoundedPlan(shape, lp->fractions), model, workload, hw, forms);
        if (!eval) continue;
        // CPU attention over a cache that is all on the GPU is the plan without it.
        if (eval->plan.cpu_attention && eval->plan.cache_gpu_percent == 100) continue;
        if (!best || eval->cost.throughput_tokens_per_s > best->cost.throughput_tokens_per_s) {
          best = std::move(eval);
        }
      }
      if (lp_tokens_per_s == 0) break;  // neither side fits
      if (lp_tokens_per_s < best_nb_tokens_per_s * (1 - kDecline)) {
        if (++nb_declines >= kPatience) break;
      } else {
        best_nb_tokens_per_s = std::max(best_nb_tokens_per_s, lp_tokens_per_s);
        nb_declines = 0;
      }
    }
    if (best_nb_tokens_per_s == 0) break;  // nothing fits at this batch size or above
    if (best_nb_tokens_per_s < best_gbs_tokens_per_s * (1 - kDecline)) {
      if (++gbs_declines >= kPatience) break;
    } else {
      best_gbs_tokens_per_s = std::max(best_gbs_tokens_per_s, best_nb_tokens_per_s);
      gbs_declines = 0;
    }
  }
  return best;
}

// Why nothing fits: the verdict on the smallest plan the options allow (one sequence, everything
// on disk, compressed where allowed).
Status SmallestPlanStatus(const ModelSpec& model, const Workload& workload, const HardwareSpec& hw,
                          const SearchOptions& options) {
  Plan plan;
  plan.weight_gpu_percent = plan.cache_gpu_percent = plan.activation_gpu_percent = 0;
  plan.compress_weight = options.allow_compress_weight || model.q4_weights;
  plan.compress_cache = options.allow_compress_cache;
  plan.cache_keys = options.cache_keys;
  plan.cache_sink = options.cache_sink;
  plan.cache_window = options.cache_window;
  Result<MemoryPlan> memory = AccountMemory(model, workload, plan);
  if (!memory.ok()) {
    plan.compress_cache = false;
    memory = AccountMemory(model, workload, plan);
  }
  if (!memory.ok()) return memory.status();
  Status fits = CheckFits(*memory, hw, plan);
  return fits.ok() ? Status::ResourceExhausted("no plan the search tried fits " + hw.name) : fits;
}

}  // namespace

Result<PlanEvaluation> EvaluatePlan(const ModelSpec& model, const Workload& workload,
                                    const Plan& plan, const HardwareSpec& hardware) {
  STRATA_RETURN_IF_ERROR(hardware.Validate());
  STRATA_ASSIGN_OR_RETURN(MemoryPlan memory, AccountMemory(model, workload, plan));
  Status fits = CheckFits(memory, hardware, plan);
  return PlanEvaluation{plan, std::move(memory), std::move(fits),
                        EstimateCost(model, workload, plan, hardware)};
}

Result<SearchResult> SearchPlan(const ModelSpec& model, const Workload& workload,
                                const HardwareSpec& hw, const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  STRATA_RETURN_IF_ERROR(model.Validate());
  STRATA_RETURN_IF_ERROR(workload.Validate(model));
  STRATA_RETURN_IF_ERROR(hw.Validate());
  const int64_t max_block =
      workload.num_prompts > 0 ? workload.num_prompts : options.max_block_size;

  SearchResult result;
  std::vector<PlanEvaluation> best_per_combination;
  for (int combination = 0; combination < 8; ++combination) {
    Plan shape;
    shape.compress_weight = combination & 1;
    shape.compress_cache = combination & 2;
    shape.cpu_attention = combination & 4;
    shape.cache_keys = options.cache_keys;
    shape.cache_sink = options.cache_sink;
    shape.cache_window = options.cache_window;
    if ((shape.compress_weight && !options.allow_compress_weight && !model.q4_weights) ||
        (shape.compress_cache && !options.allow_compress_cache) ||
        (shape.cpu_attention && !options.allow_cpu_attention)) {
      continue;
    }
    if (!AccountMemory(model, workload, shape).ok()) continue;  // e.g. 4-bit cache unsupported
    std::optional<PlanEvaluation> best =
        ScanShapes(shape, model, workload, hw, options, max_block, &result.lps_solved);
    if (best) best_per_combination.push_back(std::move(*best));
  }
  if (best_per_combination.empty()) return SmallestPlanStatus(model, workload, hw, options);

  std::sort(best_per_combination.begin(), best_per_combination.end(),
            [](const PlanEvaluation& a, const PlanEvaluation& b) {
              return a.cost.throughput_tokens_per_s > b.cost.throughput_tokens_per_s;
            });
  result.best = std::move(best_per_combination.front());
  for (size_t i = 1; i < best_per_combination.size() &&
                     static_cast<int>(result.alternatives.size()) < options.alternatives;
       ++i) {
    result.alternatives.push_back(std::move(best_per_combination[i]));
  }
  result.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace strata
