// `strata run`: a batch job over a JSONL file with one model on this machine.
#pragma once

#include <string>

#include "src/cli/policy_flags.h"

namespace strata {

struct RunOptions {
  std::string model;        // path; empty: the default model
  std::string input;        // JSONL or JSONL.zst
  std::string output;       // JSONL or JSONL.zst; also the journal a rerun resumes from
  int batch_size = 16;      // sequences per block
  int sort_window = 1024;   // requests sorted by prompt length together; <= batch_size: none
  std::string shard;        // "I/N": this job's share of the input (src/job/shard.h); empty: all
  std::string metrics;      // JSON metrics file written when the run ends; empty: none
  double progress_interval_s = 30;  // seconds between progress log lines when not on a terminal
  int threads = 0;          // CPU threads; 0: all cores
  // Placement over GPU, CPU memory and disk. --policy auto (the default) searches a plan with
  // the hardware profile; without a profile everything stays on the device and each block of
  // batch_size runs as one micro-batch. Every plan runs on the one engine (OffloadGenerator).
  PolicyFlags policy;
  std::string device = "auto";  // --device: auto, cuda or cpu (src/cli/device_flags.h)
  std::string activations = "auto";  // --activations: auto, fp32, fp16 or bf16 (likewise)
};

// Runs the job and returns the process exit code (src/cli/exit_codes.h): 0 all completed, 1
// some error lines, 2 unusable configuration or input, 75 interrupted by SIGTERM, SIGINT or
// SIGUSR1 (rerun to resume). Messages go to stderr.
int RunCommand(const RunOptions& options);

}  // namespace strata
