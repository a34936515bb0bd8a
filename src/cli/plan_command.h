// `strata plan`: the dry run. For a model (a preset, or a GGUF file, Hugging Face directory or
// strata store, described from the loaded model), a hardware profile and a workload it prints
// the chosen policy (searched, or given by --percent / --policy), the bytes per tier against each
// tier's capacity, the predicted time per layer step on every link and unit with the bottleneck,
// the predicted throughput, and the next best alternatives; --json prints the same as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/cli/policy_flags.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

struct PlanOptions {
  std::string model;     // preset name, preset YAML path, or model path
  std::string hardware;  // profile name or profile YAML path; empty: the cached profile
  int prompt_len = 0;
  int gen_len = 0;
  int64_t num_prompts = 0;  // 0: an open-ended job, measured per block
  bool json = false;
  std::string policy = "auto";   // "auto" (search) or a plan YAML file
  std::vector<int> percent;      // FlexGen's six percents; evaluates this plan instead
  int gpu_batch_size = 1;        // with --percent
  int num_gpu_batches = 1;       // with --percent
  bool cpu_attention = false;    // with --percent
  bool compress_weight = false;  // with --percent; with search, allows it (default: allowed)
  bool compress_cache = false;   // with --percent
  CacheFormatFlags cache;        // with compress_cache: its format; unset: the plan's defaults
  bool no_overlap = false;
  bool no_compression = false;    // search: never compress
  bool no_cpu_attention = false;  // search: never delegate attention to the CPU
  int64_t gpu_memory_bytes = 0;   // --gpu-memory: the GPU capacity planned for; 0: the profile's
};

// Registers the `plan` subcommand and its flags on `app`, filling *options when parsed.
CLI::App* AddPlanCommand(CLI::App& app, PlanOptions* options);

// Runs it; returns the process exit code (src/cli/exit_codes.h): kExitOk when a plan that fits
// was printed, kExitUnusable for bad input, an infeasible request or a given plan that does
// not fit (the report still prints, with the binding constraint).
int PlanCommand(const PlanOptions& options);

}  // namespace strata
