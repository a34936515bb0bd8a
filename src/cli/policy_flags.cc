#include "src/cli/policy_flags.h"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

namespace strata {

bool PolicyFlags::any() const {
  return !policy.empty() || !percent.empty() || gpu_batch_size > 0 || num_gpu_batches > 0 ||
         cpu_attention || gpu_mem_gib > 0 || !trace.empty() || !dump_schedule.empty();
}

void AddPolicyFlags(CLI::App* cmd, PolicyFlags* f) {
  cmd->add_option("--policy", f->policy, "Plan YAML file (see strata plan)");
  cmd->add_option("--percent", f->percent,
                  "FlexGen's six percents: weights, KV cache, activations on GPU then CPU (the "
                  "rest of each on disk)")
      ->expected(6);
  cmd->add_option("--gpu-batch-size", f->gpu_batch_size, "Sequences per micro-batch");
  cmd->add_option("--num-gpu-batches", f->num_gpu_batches, "Micro-batches per block");
  cmd->add_flag("--cpu-attention", f->cpu_attention,
                "Decode attention over the non-GPU cache runs on the CPU");
  cmd->add_option("--gpu-mem-gib", f->gpu_mem_gib,
                  "Device tier capacity in GiB (0: what the placement needs)");
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
  if (!f.policy.empty()) {
    if (!f.percent.empty()) {
      return Status::InvalidArgument("give either --policy or --percent, not both");
    }
    STRATA_ASSIGN_OR_RETURN(plan, LoadPlanYaml(f.policy));
  } else if (!f.percent.empty()) {
    STRATA_ASSIGN_OR_RETURN(plan, PlanFromFlexGenPercent(f.percent, gbs, nb));
  } else {
    plan.gpu_batch_size = gbs;
    plan.num_gpu_batches = nb;
  }
  if (f.cpu_attention) plan.cpu_attention = true;
  STRATA_RETURN_IF_ERROR(plan.Validate());
  return plan;
}

OffloadOptions OffloadOptionsFromFlags(const PolicyFlags& f, const Plan& plan) {
  OffloadOptions o;
  o.plan = plan;
  o.tiers.offload_dir = f.offload_dir;
  o.tiers.device_capacity_bytes = static_cast<uint64_t>(f.gpu_mem_gib * (1ull << 30));
  o.keep_trace = !f.trace.empty();
  return o;
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
