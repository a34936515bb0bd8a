// `strata run`: a batch job over a JSONL file with one model on this machine.
#pragma once

#include <string>

namespace strata {

struct RunOptions {
  std::string model;        // path; empty: the default model
  std::string input;        // JSONL or JSONL.zst
  std::string output;       // JSONL or JSONL.zst; also the journal a rerun resumes from
  int batch_size = 16;      // sequences per block
  int threads = 0;          // CPU threads; 0: all cores
};

// Runs the job and returns the process exit code (src/cli/exit_codes.h). Messages go to stderr.
int RunCommand(const RunOptions& options);

}  // namespace strata
