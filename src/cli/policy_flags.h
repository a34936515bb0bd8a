// The flags that choose how a model is spread over GPU, CPU memory and disk, shared by
// `strata run` and `strata bench`: the searched plan (--policy auto, the default, with the
// hardware profile of --hardware or the one `strata profile` cached), FlexGen's form (--percent,
// --gpu-batch-size, --num-gpu-batches, --cpu-attention), a plan file (--policy FILE), the tiers
// (--gpu-memory, --offload-dir) and what to show (--trace, --dump-schedule).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "policy/hardware_spec.h"
#include "policy/model_spec.h"
#include "policy/plan.h"
#include "policy/workload.h"
#include "src/core/status.h"
#include "src/runtime/offload_generator.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

// --cache-keys, --cache-sink and --cache-window: how a 4-bit cache stores keys and the tokens it
// keeps exact (policy/plan.h), the same for run, bench, plan and perplexity. Each is unset when
// not given, so that the plan's value holds; an explicit --cache-window 0 is a value.
struct CacheFormatFlags {
  std::string keys;           // a CacheKeys name; empty: the plan's
  std::optional<int> sink;    // Plan::cache_sink
  std::optional<int> window;  // Plan::cache_window

  bool any() const { return !keys.empty() || sink.has_value() || window.has_value(); }
};

// Registers the flags on `cmd`, filling *flags when parsed.
void AddCacheFormatFlags(CLI::App* cmd, CacheFormatFlags* flags);

// Sets the fields of *plan that `flags` give. Errors (InvalidArgument, naming the flag): any of
// them while plan->compress_cache is false (the message says to add --compress-cache), a
// --cache-keys that ParseCacheKeys refuses, a negative --cache-sink or --cache-window. Leaves
// Plan::Validate to the caller.
Status ApplyCacheFormatFlags(const CacheFormatFlags& flags, Plan* plan);

struct PolicyFlags {
  std::string policy = "auto";  // "auto" (search) or a plan YAML file
  std::string hardware;       // profile name (configs/hardware) or YAML; empty: the cached one
  std::vector<int> percent;   // FlexGen's WG WC CG CC AG AC
  int gpu_batch_size = 0;     // 0: not given
  int num_gpu_batches = 0;    // 0: not given
  bool cpu_attention = false;
  bool compress_cache = false;   // 4-bit KV cache (kernels/kv_q4_format.h)
  CacheFormatFlags cache;        // its format; unset: the plan's
  bool compress_weight = false;  // 4-bit weights
  int64_t gpu_memory_bytes = 0;  // device tier capacity (--gpu-memory); 0: the profile's, else
                                 // what the placement needs
  std::string offload_dir = ".";
  std::string trace;          // Chrome trace output path
  std::string dump_schedule;  // schedule text output path ("-": stdout)

  // True when a flag gives the plan by hand (--policy FILE, --percent, a batch shape,
  // --cpu-attention or a compression flag); --policy auto then does not search.
  bool explicit_plan() const;
  // True when any flag asks for the offloading engine (a plan by hand, tiers, trace, schedule).
  bool any() const;
};

// Where `strata profile` writes this machine's profile when given no --out and where --policy
// auto looks for one: <cache directory>/hardware.yaml (src/cli/model_path.h).
std::string DefaultHardwareProfilePath();

// The hardware profile for the search and the lane predictions: --hardware, else the cached
// profile when it exists, else nullopt. `origin` says which, for the log. Errors: --hardware
// that does not load or validate, or a cached profile that does not (the message says to rerun
// `strata profile`). Logs a warning when the profile was measured with another number of CPU
// threads (its cpu_cores) than this process computes with: set them (SetCpuThreads) first.
Result<std::optional<HardwareSpec>> HardwareFromFlags(const PolicyFlags& flags,
                                                      std::string* origin);

// The plan a run follows and a line saying how it was chosen. A plan by hand wins; else, with a
// profile and the model's description, the search's best plan for `workload` (blocks of at most
// `max_block_size` sequences; never compressed: 4-bit changes the tokens, so it is asked for by
// hand; --gpu-memory caps the device tier);
// else PlanFromFlags' default. A model whose weights are stored 4-bit (ModelSpec::q4_weights)
// gets compress_weight whatever the flags say. `device_scratch`, when given, says how many bytes
// of device memory the device backend takes for a plan besides the arena (Backend::ScratchBytes):
// the search plans the arena in what that leaves. Errors: PlanFromFlags', the search's
// ResourceExhausted when nothing fits.
struct ChosenPlan {
  Plan plan;
  bool searched = false;
  std::string how;  // e.g. "searched (profile x, 412 LPs in 40 ms)"
  // The device tier the plan was searched for (--gpu-memory or the profile's GPU capacity); 0
  // when not searched.
  int64_t device_capacity_bytes = 0;
};
using DeviceScratchFn = std::function<int64_t(const Plan&)>;
Result<ChosenPlan> ChoosePlan(const PolicyFlags& flags, const std::optional<ModelSpec>& model,
                              const Workload& workload,
                              const std::optional<HardwareSpec>& hardware,
                              int64_t max_block_size, const DeviceScratchFn& device_scratch = {});

// Registers the flags on `cmd`, filling *flags when parsed.
void AddPolicyFlags(CLI::App* cmd, PolicyFlags* flags);

// The plan the flags describe: the plan file, or --percent with the batch shape, or (with neither)
// everything on the GPU in blocks of gpu_batch_size x num_gpu_batches (1 x 1 when not given).
// Errors: an unreadable or invalid plan, --percent with --policy FILE.
Result<Plan> PlanFromFlags(const PolicyFlags& flags);

// OffloadOptions for the chosen plan with the flags' tiers and trace setting. A searched plan's
// device tier is capped at the capacity it was searched for, so that a plan the search calls
// feasible is held to it.
OffloadOptions OffloadOptionsFromFlags(const PolicyFlags& flags, const ChosenPlan& chosen);

// Makes sure the disk tier can put its scratch file in `flags.offload_dir` when `plan` keeps
// anything on disk, so that a bad directory is reported before a model loads: a missing
// directory whose parent exists is created (and the log says so); then it must be a writable
// directory. Does nothing for a plan without disk parts. Errors: NotFound (neither the directory
// nor its parent exists), InvalidArgument (not a directory), IoError (not writable, or mkdir
// failed); each message names the directory and says what to pass --offload-dir.
Status PrepareOffloadDir(const PolicyFlags& flags, const Plan& plan);

// Writes `text` to `path` ("-": stdout).
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace strata
