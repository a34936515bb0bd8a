#include "src/cli/policy_flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "policy/memory_accounting.h"
#include "policy/search.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/device_flags.h"
#include "src/cli/model_path.h"
#include "src/core/log.h"

namespace strata {

bool PolicyFlags::explicit_plan() const {
  return policy != "auto" || !percent.empty() || gpu_batch_size > 0 || num_gpu_batches > 0 ||
         cpu_attention || compress_cache || cache.any() || compress_weight;
}

bool PolicyFlags::any() const {
  return explicit_plan() || gpu_memory_bytes > 0 || !trace.empty() || !dump_schedule.empty();
}

std::string DefaultHardwareProfilePath() {
  return (std::filesystem::path(CacheDirectory()) / "hardware.yaml").string();
}

namespace {

// A profile's CPU rates hold for the thread count they were measured with.
void WarnOnThreadMismatch(const HardwareSpec& hw, const std::string& origin) {
  const int threads = CpuThreads();
  if (hw.cpu_cores == threads) return;
  LogWarn("hardware profile " + origin + " was measured with " + std::to_string(hw.cpu_cores) +
          " CPU threads and this run computes with " + std::to_string(threads) +
          ": its CPU" + (hw.gpu_emulated ? " and emulated-device" : "") +
          " predictions assume the former; run `strata profile --threads " +
          std::to_string(threads) + "` for a profile of this setting");
}

Result<std::optional<HardwareSpec>> LoadProfile(const PolicyFlags& f, std::string* origin) {
  if (!f.hardware.empty()) {
    STRATA_ASSIGN_OR_RETURN(std::string path, ResolveConfigFile("hardware", f.hardware));
    STRATA_ASSIGN_OR_RETURN(HardwareSpec hw, LoadHardwareSpecYaml(path));
    *origin = path;
    return std::optional<HardwareSpec>(std::move(hw));
  }
  const std::string cached = DefaultHardwareProfilePath();
  std::error_code ec;
  if (!std::filesystem::exists(cached, ec)) {
    *origin = "none (no --hardware and no " + cached + "; `strata profile` writes it)";
    return std::optional<HardwareSpec>();
  }
  Result<HardwareSpec> hw = LoadHardwareSpecYaml(cached);
  if (!hw.ok()) {
    return hw.status().WithContext("the cached hardware profile (rerun `strata profile` or pass "
                                   "--hardware)");
  }
  *origin = cached;
  return std::optional<HardwareSpec>(std::move(hw).value());
}

}  // namespace

Result<std::optional<HardwareSpec>> HardwareFromFlags(const PolicyFlags& f, std::string* origin) {
  STRATA_ASSIGN_OR_RETURN(std::optional<HardwareSpec> hw, LoadProfile(f, origin));
  if (hw) WarnOnThreadMismatch(*hw, *origin);
  return hw;
}

Result<ChosenPlan> ChoosePlan(const PolicyFlags& f, const std::optional<ModelSpec>& model,
                              const Workload& workload,
                              const std::optional<HardwareSpec>& hardware,
                              int64_t max_block_size, const DeviceScratchFn& device_scratch) {
  ChosenPlan chosen;
  if (f.explicit_plan() || !model || !hardware) {
    STRATA_ASSIGN_OR_RETURN(chosen.plan, PlanFromFlags(f));
    chosen.how = f.explicit_plan() ? "given"
                 : !hardware      ? "default (no hardware profile to search with)"
                                  : "default (the model's layout is not one the search describes)";
    if (model && model->q4_weights && !chosen.plan.compress_weight) {
      chosen.plan.compress_weight = true;
      chosen.how += ", with 4-bit weights as the model stores them";
    }
    return chosen;
  }
  HardwareSpec hw = *hardware;
  if (f.gpu_memory_bytes > 0) hw.gpu_capacity_bytes = f.gpu_memory_bytes;
  SearchOptions options;
  options.allow_compress_weight = options.allow_compress_cache = false;
  options.max_block_size = max_block_size;
  Workload w = workload;
  w.num_prompts = 0;
  // The search places the arena; the backend's scratch (Backend::ScratchBytes) comes out of the
  // same device memory, so the search runs again on what a plan's scratch leaves, until the
  // plan it finds needs no more scratch than was set aside.
  const int64_t capacity = hw.gpu_capacity_bytes;
  int64_t set_aside = 0;
  Result<SearchResult> r = SearchPlan(*model, w, hw, options);
  for (int tries = 0; r.ok() && device_scratch; ++tries) {
    const int64_t scratch = device_scratch(r->best.plan);
    if (scratch <= set_aside) break;
    if (tries == 4) {
      return Status::ResourceExhausted(
          "--policy auto found no plan that leaves room for the device backend's scratch in " +
          FormatBytes(capacity) + "; give the run more --gpu-memory or a plan by hand");
    }
    set_aside = scratch;
    hw.gpu_capacity_bytes = capacity - set_aside;
    r = SearchPlan(*model, w, hw, options);
  }
  if (!r.ok()) return r.status().WithContext("--policy auto on profile " + hw.name);
  chosen.plan = r->best.plan;
  chosen.searched = true;
  chosen.device_capacity_bytes = capacity;
  char line[160];
  std::snprintf(line, sizeof(line), "searched (profile %s, %d LPs in %.0f ms, predicted %.2f "
                "tokens/s)", hw.name.c_str(), r->lps_solved, r->elapsed_s * 1e3,
                r->best.cost.throughput_tokens_per_s);
  chosen.how = line;
  return chosen;
}

void AddCacheFormatFlags(CLI::App* cmd, CacheFormatFlags* f) {
  const std::string group = std::to_string(kChannelKeyGroup);
  const std::string keys =
      "With --compress-cache: how keys are stored: channel (default): per channel over groups of " +
      group +
      " tokens, the unfinished group exact (KIVI); smoothed: per-sequence channel smoothing, "
      "then rotated; rotated: Walsh-Hadamard rotated; plain: FlexGen's groups";
  const std::string sink =
      "With --compress-cache: also keep each sequence's first N tokens exact (fp32) for decode "
      "attention (default " +
      std::to_string(kDefaultCacheSink) + ")";
  const std::string window =
      "With --compress-cache: also keep each sequence's N most recent tokens exact (fp32) for "
      "decode attention (default " +
      std::to_string(kDefaultCacheWindow) + "; channel keys need " + group + " or more)";
  cmd->add_option("--cache-keys", f->keys, keys);
  cmd->add_option("--cache-sink", f->sink, sink);
  cmd->add_option("--cache-window", f->window, window);
}

Status ApplyCacheFormatFlags(const CacheFormatFlags& f, Plan* plan) {
  if (!f.keys.empty() && !plan->compress_cache) {
    return Status::InvalidArgument("--cache-keys needs the 4-bit cache: add --compress-cache");
  }
  if ((f.sink || f.window) && !plan->compress_cache) {
    return Status::InvalidArgument(
        "--cache-sink and --cache-window keep tokens of the 4-bit cache exact: add "
        "--compress-cache");
  }
  if (!f.keys.empty()) {
    Result<CacheKeys> keys = ParseCacheKeys(f.keys);
    if (!keys.ok()) return keys.status().WithContext("--cache-keys");
    plan->cache_keys = *keys;
  }
  if (f.sink.value_or(0) < 0 || f.window.value_or(0) < 0) {
    return Status::InvalidArgument(
        "--cache-sink and --cache-window count tokens and must be at least 0");
  }
  if (f.sink) plan->cache_sink = *f.sink;
  if (f.window) plan->cache_window = *f.window;
  return Status::Ok();
}

void AddPolicyFlags(CLI::App* cmd, PolicyFlags* f) {
  cmd->add_option("--policy", f->policy,
                  "auto: search the plan with the hardware profile; or a plan YAML file (see "
                  "strata plan)")
      ->capture_default_str();
  cmd->add_option("--hardware", f->hardware,
                  "Hardware profile for --policy auto and the lane predictions: a name from "
                  "configs/hardware or a YAML file (default: " +
                      DefaultHardwareProfilePath() + " when `strata profile` wrote it)");
  cmd->add_option("--percent", f->percent,
                  "FlexGen's six percents: weights, KV cache, activations on GPU then CPU (the "
                  "rest of each on disk)")
      ->expected(6);
  cmd->add_option("--gpu-batch-size", f->gpu_batch_size, "Sequences per micro-batch");
  cmd->add_option("--num-gpu-batches", f->num_gpu_batches, "Micro-batches per block");
  cmd->add_flag("--cpu-attention", f->cpu_attention,
                "Decode attention over the non-GPU cache runs on the CPU");
  cmd->add_flag("--compress-cache", f->compress_cache,
                "4-bit KV cache: stored, moved and attended in 4 bits");
  AddCacheFormatFlags(cmd, &f->cache);
  cmd->add_flag("--compress-weight", f->compress_weight, "4-bit weights");
  AddGpuMemoryFlag(cmd, &f->gpu_memory_bytes);
  cmd->add_option("--offload-dir", f->offload_dir, "Directory for the disk tier's scratch file")
      ->capture_default_str();
  cmd->add_option("--trace", f->trace, "Write a Chrome trace (Perfetto) of the run here");
  cmd->add_option("--dump-schedule", f->dump_schedule,
                  "Write the block schedule here ('-': stdout) and exit");
}

Result<Plan> PlanFromFlags(const PolicyFlags& f) {
  const int gbs = f.gpu_batch_size > 0 ? f.gpu_batch_size : 1;
  const int nb = f.num_gpu_batches > 0 ? f.num_gpu_batches : 1;
  Plan plan;
  if (f.policy != "auto") {
    if (!f.percent.empty()) {
      return Status::InvalidArgument("give either --policy FILE or --percent, not both");
    }
    STRATA_ASSIGN_OR_RETURN(plan, LoadPlanYaml(f.policy));
  } else if (!f.percent.empty()) {
    STRATA_ASSIGN_OR_RETURN(plan, PlanFromFlexGenPercent(f.percent, gbs, nb));
  } else {
    plan.gpu_batch_size = gbs;
    plan.num_gpu_batches = nb;
  }
  if (f.cpu_attention) plan.cpu_attention = true;
  if (f.compress_cache) plan.compress_cache = true;
  STRATA_RETURN_IF_ERROR(ApplyCacheFormatFlags(f.cache, &plan));
  if (f.compress_weight) plan.compress_weight = true;
  STRATA_RETURN_IF_ERROR(plan.Validate());
  return plan;
}

OffloadOptions OffloadOptionsFromFlags(const PolicyFlags& f, const ChosenPlan& chosen) {
  OffloadOptions o;
  o.plan = chosen.plan;
  o.tiers.offload_dir = f.offload_dir;
  o.tiers.device_capacity_bytes =
      static_cast<uint64_t>(f.gpu_memory_bytes > 0 ? f.gpu_memory_bytes
                                                   : chosen.device_capacity_bytes);
  o.keep_trace = !f.trace.empty();
  return o;
}

Status PrepareOffloadDir(const PolicyFlags& f, const Plan& plan) {
  if (plan.weight_disk_percent() == 0 && plan.cache_disk_percent() == 0 &&
      plan.activation_disk_percent() == 0) {
    return Status::Ok();
  }
  const std::string dir = f.offload_dir.empty() ? "." : f.offload_dir;
  const std::string what = "offload directory " + dir;
  const std::string fix = "pass --offload-dir a writable directory on a disk with room";
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(st)) {
    std::filesystem::path path = std::filesystem::absolute(dir, ec).lexically_normal();
    if (!path.has_filename()) path = path.parent_path();  // "dir/"
    const std::filesystem::path parent = path.parent_path();
    if (!std::filesystem::is_directory(parent, ec)) {
      return Status::NotFound(what + " does not exist, nor does " + parent.string() +
                              "; create it (mkdir -p " + dir + ") or " + fix);
    }
    if (!std::filesystem::create_directory(dir, ec) && ec) {
      return Status::IoError("cannot create " + what + " (" + ec.message() + "); " + fix);
    }
    LogInfo("created " + what + " for the disk tier's scratch file");
    return Status::Ok();
  }
  if (!std::filesystem::is_directory(st)) {
    return Status::InvalidArgument(what + " is not a directory; " + fix);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::IoError(what + " is not writable (" + std::strerror(errno) + "); " + fix);
  }
  return Status::Ok();
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return Status::Ok();
  }
  std::ofstream out(path);
  out << text;
  return out ? Status::Ok() : Status::IoError("cannot write " + path);
}

}  // namespace strata
