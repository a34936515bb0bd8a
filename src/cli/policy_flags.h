// The flags that choose how a model is spread over GPU, CPU memory and disk, shared by
// `strata run` and `strata bench`: FlexGen's form (--percent, --gpu-batch-size,
// --num-gpu-batches, --cpu-attention), a plan file (--policy), the tiers (--gpu-mem-gib,
// --offload-dir) and what to show (--trace, --dump-schedule).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "src/core/status.h"
#include "src/runtime/offload_generator.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

struct PolicyFlags {
  std::string policy;         // a plan YAML file
  std::vector<int> percent;   // FlexGen's WG WC CG CC AG AC
  int gpu_batch_size = 0;     // 0: not given
  int num_gpu_batches = 0;    // 0: not given
  bool cpu_attention = false;
  double gpu_mem_gib = 0;     // device tier capacity; 0: what the placement needs
  std::string offload_dir = ".";
  std::string trace;          // Chrome trace output path
  std::string dump_schedule;  // schedule text output path ("-": stdout)

  // True when any flag asks for the offloading engine.
  bool any() const;
};

// Registers the flags on `cmd`, filling *flags when parsed.
void AddPolicyFlags(CLI::App* cmd, PolicyFlags* flags);

// The plan the flags describe: the plan file, or --percent with the batch shape, or (with neither)
// everything on the GPU in blocks of gpu_batch_size x num_gpu_batches (1 x 1 when not given).
// Errors: an unreadable or invalid plan, --percent with --policy.
Result<Plan> PlanFromFlags(const PolicyFlags& flags);

// OffloadOptions for `plan` with the flags' tiers and trace setting.
OffloadOptions OffloadOptionsFromFlags(const PolicyFlags& flags, const Plan& plan);

// Writes `text` to `path` ("-": stdout).
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace strata
