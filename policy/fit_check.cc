#include "policy/fit_check.h"

#include <algorithm>
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

// The parts of one tier, largest first, as "weights 12.01 GB, workspace 2.84 GB".
std::string LargestParts(const MemoryPlan& m, Tier tier) {
  std::vector<std::pair<int64_t, const char*>> parts = {
      {m.weight_bytes.at(tier), "weights"},
      {m.kv_cache_bytes.at(tier), "KV cache"},
      {m.activation_bytes.at(tier), "activations"},
      {m.staging_bytes.at(tier), "staging"},
      {m.workspace_bytes.at(tier), "workspace"},
      {m.alignment_bytes.at(tier), "alignment"}};
  std::sort(parts.rbegin(), parts.rend());
  std::string text;
  for (int i = 0; i < 3 && parts[i].first > 0; ++i) {
    text += (i ? ", " : "") + std::string(parts[i].second) + " " + FormatBytes(parts[i].first);
  }
  return text;
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
        "); largest parts: " + LargestParts(m, tier) + ". To fit: " + Advice(m, tier, plan));
  }
  return Status::Ok();
}

}  // namespace strata
