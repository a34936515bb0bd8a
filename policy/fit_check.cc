#include "policy/fit_check.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata {
namespace {

int64_t Capacity(const HardwareSpec& hw, Tier tier) {
  return tier == Tier::kGpu   ? hw.gpu_capacity_bytes
         : tier == Tier::kCpu ? hw.cpu_capacity_bytes
                              : hw.disk_capacity_bytes;
}

// The parts of some tiers (`of` sums a part's bytes over them), largest first, as
// "weights 12.01 GB, workspace 2.84 GB".
std::string LargestParts(const MemoryPlan& m, const std::function<int64_t(const TierBytes&)>& of) {
  std::vector<std::pair<int64_t, const char*>> parts = {
      {of(m.weight_bytes), "weights"},
      {of(m.kv_cache_bytes), "KV cache"},
      {of(m.activation_bytes), "activations"},
      {of(m.staging_bytes), "staging"},
      {of(m.workspace_bytes), "workspace"},
      {of(m.alignment_bytes), "alignment"}};
  std::sort(parts.rbegin(), parts.rend());
  std::string text;
  for (int i = 0; i < 3 && parts[i].first > 0; ++i) {
    text += (i ? ", " : "") + std::string(parts[i].second) + " " + FormatBytes(parts[i].first);
  }
  return text;
}

// The families a plan splits over the tiers, in the order a plan too big for host memory moves
// them to disk.
struct Family {
  const char* name;
  int Plan::*gpu_percent;
  int Plan::*cpu_percent;
};
constexpr Family kFamilies[] = {
    {"weights", &Plan::weight_gpu_percent, &Plan::weight_cpu_percent},
    {"the KV cache", &Plan::cache_gpu_percent, &Plan::cache_cpu_percent},
    {"activations", &Plan::activation_gpu_percent, &Plan::activation_cpu_percent}};

// A plan near `plan` that fits host memory, and what it changed.
struct NearestFit {
  Plan plan;
  MemoryPlan memory;
  std::string change;  // e.g. "move weights to disk"
};

// The first plan that fits `available` of: `plan` with a family moved to disk a percent at a time
// (its CPU share first, then its GPU share; each family wholly before the next), then, with all
// on disk, fewer micro-batches and then smaller ones. Plans the accounting refuses are skipped.
std::optional<NearestFit> FindNearestFit(const ModelSpec& model, const Workload& workload,
                                         const Plan& plan, int64_t available) {
  Plan p = plan;
  std::string moved;
  const auto fits = [&](const std::string& change) -> std::optional<NearestFit> {
    Result<MemoryPlan> m = AccountMemory(model, workload, p);
    if (!m.ok() || HostBytesOf(*m, model, p) + kHostMemoryReserveBytes > available) {
      return std::nullopt;
    }
    return NearestFit{p, *m, change};
  };
  for (const Family& f : kFamilies) {
    const int gpu = p.*f.gpu_percent, kept = gpu + p.*f.cpu_percent;
    if (kept == 0) continue;
    moved += std::string(moved.empty() ? "" : " and ") + f.name;
    for (int k = kept - 1; k >= 0; --k) {
      p.*f.gpu_percent = std::min(gpu, k);
      p.*f.cpu_percent = k - p.*f.gpu_percent;
      if (auto fit = fits("move " + moved + " to disk")) return fit;
    }
  }
  const std::string shrink = (moved.empty() ? "" : "move " + moved + " to disk and ") +
                             std::string("run smaller blocks");
  while (p.block_size() > 1) {
    if (p.num_gpu_batches > 1) {
      p.num_gpu_batches /= 2;
    } else {
      p.gpu_batch_size /= 2;
    }
    if (auto fit = fits(shrink)) return fit;
  }
  return std::nullopt;
}

std::string Advice(const MemoryPlan& m, Tier tier, const Plan& plan) {
  std::vector<std::string> ways;
  if (tier == Tier::kGpu) {
    if (m.weight_bytes.gpu_bytes > 0) ways.push_back("lower weight_gpu_percent");
    if (m.kv_cache_bytes.gpu_bytes > 0) ways.push_back("lower cache_gpu_percent");
    if (m.activation_bytes.gpu_bytes > 0) ways.push_back("lower activation_gpu_percent");
    if (plan.gpu_batch_size > 1) ways.push_back("a smaller --gpu-batch-size (staging, workspace)");
  } else if (tier == Tier::kCpu) {
    if (m.weight_bytes.cpu_bytes > 0) ways.push_back("move weights to disk (weight_cpu_percent)");
    if (m.kv_cache_bytes.cpu_bytes > 0)
      ways.push_back("move the KV cache to disk (cache_cpu_percent)");
  } else {
    ways.push_back("more free space in the offload directory");
  }
  if (plan.num_gpu_batches > 1) ways.push_back("fewer --num-gpu-batches");
  if (!plan.compress_weight && m.weight_bytes.at(tier) > 0) ways.push_back("--compress-weight");
  if (!plan.compress_cache && m.kv_cache_bytes.at(tier) > 0) ways.push_back("--compress-cache");
  std::string text;
  for (size_t i = 0; i < ways.size(); ++i) text += (i ? "; " : "") + ways[i];
  return text;
}

}  // namespace

Status CheckFits(const MemoryPlan& m, const HardwareSpec& hw, const Plan& plan) {
  const int64_t all_capacity =
      hw.gpu_capacity_bytes + hw.cpu_capacity_bytes + hw.disk_capacity_bytes;
  const int64_t all_needed =
      m.weight_bytes.sum() + m.kv_cache_bytes.sum() + m.activation_bytes.sum();
  if (all_needed > all_capacity) {
    return Status::ResourceExhausted(
        "all tiers together: the weights, KV cache and activations need " +
        FormatBytes(all_needed) + " but GPU + CPU + disk of '" + hw.name + "' hold " +
        FormatBytes(all_capacity) + " (over by " + FormatBytes(all_needed - all_capacity) +
        "; weights alone " + FormatBytes(m.weight_bytes.sum()) +
        "); no placement fits: use --compress-weight/--compress-cache, fewer sequences per "
        "block, or a machine with more disk");
  }
  for (Tier tier : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    const int64_t need = m.total_bytes.at(tier), have = Capacity(hw, tier);
    if (need <= have) continue;
    return Status::ResourceExhausted(
        std::string(TierName(tier)) + " memory: the plan needs " + FormatBytes(need) + " but '" +
        hw.name + "' allows " + FormatBytes(have) + " (over by " + FormatBytes(need - have) +
        "); largest parts: " +
        LargestParts(m, [tier](const TierBytes& b) { return b.at(tier); }) +
        ". To fit: " + Advice(m, tier, plan));
  }
  return Status::Ok();
}

int64_t HostBytesOf(const MemoryPlan& m, const ModelSpec& model, const Plan& plan) {
  const int64_t quantized = plan.compress_weight && !model.q4_weights ? m.weight_bytes.sum() : 0;
  return m.total_bytes.gpu_bytes + m.total_bytes.cpu_bytes + quantized;
}

Status CheckHostMemory(const ModelSpec& model, const Workload& workload, const Plan& plan,
                       int64_t available_bytes) {
  STRATA_ASSIGN_OR_RETURN(MemoryPlan m, AccountMemory(model, workload, plan));
  return CheckHostMemory(m, model, workload, plan, available_bytes);
}

Status CheckHostMemory(const MemoryPlan& m, const ModelSpec& model, const Workload& workload,
                       const Plan& plan, int64_t available_bytes) {
  const int64_t need = HostBytesOf(m, model, plan);
  if (need + kHostMemoryReserveBytes <= available_bytes) return Status::Ok();
  const int64_t quantized = need - m.total_bytes.gpu_bytes - m.total_bytes.cpu_bytes;
  std::string text =
      "host memory: the plan (" + PlanToFlexGenFlags(plan) + ") needs " + FormatBytes(need) +
      " of host memory (device tier " + FormatBytes(m.total_bytes.gpu_bytes) +
      ", which this engine keeps in host memory; CPU tier " +
      FormatBytes(m.total_bytes.cpu_bytes) +
      (quantized > 0 ? "; 4-bit weights quantized at setup " + FormatBytes(quantized) : "") +
      ") but " + FormatBytes(available_bytes) + " is available (MemAvailable), of which " +
      FormatBytes(kHostMemoryReserveBytes) +
      " is kept for the rest of the process; largest parts: " +
      LargestParts(m, [](const TierBytes& b) { return b.gpu_bytes + b.cpu_bytes; }) + ". ";
  if (std::optional<NearestFit> fit = FindNearestFit(model, workload, plan, available_bytes)) {
    text += "To fit, " + fit->change + ": " + PlanToFlexGenFlags(fit->plan) + " needs " +
            FormatBytes(HostBytesOf(fit->memory, model, fit->plan)) + " of host memory and " +
            FormatBytes(fit->memory.total_bytes.disk_bytes) + " of disk under --offload-dir";
  } else {
    text += "Nothing fits, even with weights, KV cache and activations on disk in blocks of 1: "
            "free some memory or use a larger machine";
  }
  return Status::ResourceExhausted(text);
}

}  // namespace strata
