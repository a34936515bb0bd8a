#include "policy/plan.h"

#include <cstdio>
#include <sstream>

#include "policy/yaml_reader.h"

namespace strata {
namespace {

Status CheckFamily(const char* family, int gpu, int cpu) {
  const std::string f(family);
  if (gpu < 0 || gpu > 100) {
    return Status::InvalidArgument(f + "_gpu_percent must be in [0, 100], got " +
                                   std::to_string(gpu));
  }
  if (cpu < 0 || cpu > 100) {
    return Status::InvalidArgument(f + "_cpu_percent must be in [0, 100], got " +
                                   std::to_string(cpu));
  }
  if (gpu + cpu > 100) {
    return Status::InvalidArgument(f + "_gpu_percent + " + f + "_cpu_percent must be at most " +
                                   "100 (disk takes the rest), got " + std::to_string(gpu) + " + " +
                                   std::to_string(cpu));
  }
  return Status::Ok();
}

std::string TierLine(const char* family, int gpu, int cpu) {
  char line[96];
  std::snprintf(line, sizeof(line), "  %-12s GPU %3d%%  CPU %3d%%  disk %3d%%\n", family, gpu, cpu,
                100 - gpu - cpu);
  return line;
}

}  // namespace

const char* CacheKeysName(CacheKeys keys) {
  switch (keys) {
    case CacheKeys::kPlain:
      return "plain";
    case CacheKeys::kRotated:
      return "rotated";
    case CacheKeys::kSmoothed:
      return "smoothed";
    case CacheKeys::kChannel:
      return "channel";
  }
  return "?";
}

Result<CacheKeys> ParseCacheKeys(const std::string& name) {
  for (CacheKeys k :
       {CacheKeys::kPlain, CacheKeys::kRotated, CacheKeys::kSmoothed, CacheKeys::kChannel}) {
    if (name == CacheKeysName(k)) return k;
  }
  const std::string group = std::to_string(kChannelKeyGroup);
  return Status::InvalidArgument(
      "cache keys must be channel (per channel over groups of " + group +
      " tokens; the default), smoothed (smoothed, then rotated), rotated (Walsh–Hadamard rotated "
      "first) or plain (FlexGen's 4-bit groups), got '" +
      name + "'");
}

Status Plan::Validate() const {
  if (gpu_batch_size < 1) {
    return Status::InvalidArgument("gpu_batch_size must be at least 1, got " +
                                   std::to_string(gpu_batch_size));
  }
  if (num_gpu_batches < 1) {
    return Status::InvalidArgument("num_gpu_batches must be at least 1, got " +
                                   std::to_string(num_gpu_batches));
  }
  STRATA_RETURN_IF_ERROR(CheckFamily("weight", weight_gpu_percent, weight_cpu_percent));
  STRATA_RETURN_IF_ERROR(CheckFamily("cache", cache_gpu_percent, cache_cpu_percent));
  STRATA_RETURN_IF_ERROR(CheckFamily("activation", activation_gpu_percent, activation_cpu_percent));
  if (cache_sink < 0 || cache_window < 0) {
    return Status::InvalidArgument("cache_sink and cache_window count tokens kept exact and "
                                   "must be at least 0, got " + std::to_string(cache_sink) +
                                   " and " + std::to_string(cache_window));
  }
  if (channel_keys() && cache_window < kChannelKeyGroup) {
    const std::string group = std::to_string(kChannelKeyGroup);
    return Status::InvalidArgument("cache_window is " + std::to_string(cache_window) +
                                   ", but channel keys read their unfinished group of " + group +
                                   " tokens from the exact window: give --cache-window " + group +
                                   " or more, or --cache-keys smoothed");
  }
  return Status::Ok();
}

std::string PlanToString(const Plan& plan) {
  std::ostringstream out;
  out << "  block        " << plan.block_size() << " sequences = " << plan.gpu_batch_size
      << " per micro-batch x " << plan.num_gpu_batches << " micro-batches\n";
  out << TierLine("weights", plan.weight_gpu_percent, plan.weight_cpu_percent);
  out << TierLine("KV cache", plan.cache_gpu_percent, plan.cache_cpu_percent);
  out << TierLine("activations", plan.activation_gpu_percent, plan.activation_cpu_percent);
  out << "  attention    " << (plan.cpu_attention ? "CPU over the non-GPU cache" : "GPU") << "\n";
  out << "  compression  weights " << (plan.compress_weight ? "4-bit" : "off") << ", KV cache "
      << (plan.compress_cache ? std::string("4-bit, ") + CacheKeysName(plan.cache_keys) + " keys"
                              : std::string("off"));
  if (plan.exact_tokens()) {
    out << ", first " << plan.cache_sink << " and last " << plan.cache_window
        << " tokens exact";
  }
  out << "\n";
  out << "  overlap      " << (plan.overlap ? "on" : "off") << "\n";
  return out.str();
}

std::string PlanToFlexGenFlags(const Plan& plan) {
  std::ostringstream out;
  out << "--percent " << plan.weight_gpu_percent << " " << plan.weight_cpu_percent << " "
      << plan.cache_gpu_percent << " " << plan.cache_cpu_percent << " "
      << plan.activation_gpu_percent << " " << plan.activation_cpu_percent << " --gpu-batch-size "
      << plan.gpu_batch_size << " --num-gpu-batches " << plan.num_gpu_batches;
  if (plan.cpu_attention) out << " --cpu-attention";
  if (plan.compress_weight) out << " --compress-weight";
  if (plan.compress_cache) out << " --compress-cache";
  if (plan.compress_cache) {
    const Plan defaults;
    if (plan.cache_keys != defaults.cache_keys) {
      out << " --cache-keys " << CacheKeysName(plan.cache_keys);
    }
    if (plan.cache_sink != defaults.cache_sink) out << " --cache-sink " << plan.cache_sink;
    if (plan.cache_window != defaults.cache_window) {
      out << " --cache-window " << plan.cache_window;
    }
  }
  if (!plan.overlap) out << " --no-overlap";
  return out.str();
}

Result<Plan> PlanFromFlexGenPercent(const std::vector<int>& percent, int gpu_batch_size,
                                    int num_gpu_batches) {
  if (percent.size() != 6) {
    return Status::InvalidArgument(
        "--percent takes six numbers: weights GPU, weights CPU, cache GPU, cache CPU, "
        "activations GPU, activations CPU (disk gets the rest); got " +
        std::to_string(percent.size()));
  }
  Plan plan;
  plan.weight_gpu_percent = percent[0];
  plan.weight_cpu_percent = percent[1];
  plan.cache_gpu_percent = percent[2];
  plan.cache_cpu_percent = percent[3];
  plan.activation_gpu_percent = percent[4];
  plan.activation_cpu_percent = percent[5];
  plan.gpu_batch_size = gpu_batch_size;
  plan.num_gpu_batches = num_gpu_batches;
  STRATA_RETURN_IF_ERROR(plan.Validate());
  return plan;
}

std::string PlanToYaml(const Plan& plan) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::ostringstream out;
  out << "gpu_batch_size: " << plan.gpu_batch_size << "\n"
      << "num_gpu_batches: " << plan.num_gpu_batches << "\n"
      << "weight_gpu_percent: " << plan.weight_gpu_percent << "\n"
      << "weight_cpu_percent: " << plan.weight_cpu_percent << "\n"
      << "cache_gpu_percent: " << plan.cache_gpu_percent << "\n"
      << "cache_cpu_percent: " << plan.cache_cpu_percent << "\n"
      << "activation_gpu_percent: " << plan.activation_gpu_percent << "\n"
      << "activation_cpu_percent: " << plan.activation_cpu_percent << "\n"
      << "cpu_attention: " << b(plan.cpu_attention) << "\n"
      << "compress_weight: " << b(plan.compress_weight) << "\n"
      << "compress_cache: " << b(plan.compress_cache) << "\n"
      << "cache_keys: " << CacheKeysName(plan.cache_keys) << "\n"
      << "cache_sink: " << plan.cache_sink << "\n"
      << "cache_window: " << plan.cache_window << "\n"
      << "overlap: " << b(plan.overlap) << "\n";
  return out.str();
}

Result<Plan> ParsePlanYaml(const std::string& text, const std::string& origin) {
  policy_internal::YamlMapReader reader(text, origin);
  Plan plan;
  reader.Int("gpu_batch_size", &plan.gpu_batch_size, 1);
  reader.Int("num_gpu_batches", &plan.num_gpu_batches, 1);
  reader.Int("weight_gpu_percent", &plan.weight_gpu_percent, 0);
  reader.Int("weight_cpu_percent", &plan.weight_cpu_percent, 0);
  reader.Int("cache_gpu_percent", &plan.cache_gpu_percent, 0);
  reader.Int("cache_cpu_percent", &plan.cache_cpu_percent, 0);
  reader.Int("activation_gpu_percent", &plan.activation_gpu_percent, 0);
  reader.Int("activation_cpu_percent", &plan.activation_cpu_percent, 0);
  reader.Bool("cpu_attention", &plan.cpu_attention);
  reader.Bool("compress_weight", &plan.compress_weight);
  reader.Bool("compress_cache", &plan.compress_cache);
  std::string keys;
  reader.String("cache_keys", &keys);
  // Absent in files written when they were 0, whatever the defaults are now.
  plan.cache_sink = plan.cache_window = 0;
  reader.OptionalInt("cache_sink", &plan.cache_sink, 0);
  reader.OptionalInt("cache_window", &plan.cache_window, 0);
  reader.Bool("overlap", &plan.overlap);
  STRATA_RETURN_IF_ERROR(reader.Finish());
  Result<CacheKeys> cache_keys = ParseCacheKeys(keys);
  if (!cache_keys.ok()) return cache_keys.status().WithContext(origin + ": cache_keys");
  plan.cache_keys = *cache_keys;
  Status valid = plan.Validate();
  if (!valid.ok()) return valid.WithContext(origin);
  return plan;
}

Result<Plan> LoadPlanYaml(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, policy_internal::ReadTextFile(path));
  return ParsePlanYaml(text, path);
}

}  // namespace strata
