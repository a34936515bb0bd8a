// `strata bench`: throughput of the offloading engine on a preset from configs/models with
// synthetic weights (or on a real model file or directory) and synthetic prompts, reported as
// FlexGen reports it — prefill, decode and total tokens per second — but measured over full
// runs, never projected from a few layers — and each lane's busy time per kind of layer and phase
// next to the cost model's prediction from the hardware profile (src/cli/lane_report.h). With
// --trace it writes the run's Chrome trace; with --dump-schedule, the block schedule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/cli/policy_flags.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

struct BenchOptions {
  std::string model;          // preset name or YAML (synthetic weights), or a model path
  int num_layers = 0;         // override the preset's transformer blocks (0: as the preset)
  int prompt_len = 512;
  int gen_len = 32;
  int num_blocks = 1;         // blocks of gpu_batch_size * num_gpu_batches prompts
  int max_block_size = 16;    // --policy auto: the largest block the search may choose
  PolicyFlags policy;         // the plan (searched with a hardware profile, else all on the GPU
                              // in blocks of 1), tiers, trace
  std::string weight_dtype = "f16";  // f16, bf16 or f32
  int threads = 0;            // CPU threads (0: all cores)
  std::string device = "auto";  // --device: auto, cuda or cpu (src/cli/device_flags.h)
  std::string activations = "auto";  // --activations: auto, fp32, fp16 or bf16 (likewise)
};

// Registers the `bench` subcommand and its flags on `app`, filling *options when parsed.
CLI::App* AddBenchCommand(CLI::App& app, BenchOptions* options);

// Runs it; returns the process exit code (src/cli/exit_codes.h).
int BenchCommand(const BenchOptions& options);

}  // namespace strata
