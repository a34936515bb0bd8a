// `strata perplexity`: what compression costs, measured. The text of --input is tokenized and cut
// into consecutive, non-overlapping windows of --window tokens (BOS first in each when the
// tokenizer adds one; the last window may be shorter). The first --prompt tokens of each window
// are its prompt: one prefill step, context only. Every later token is scored by the
// log-probability the model gave it, the first from the prefill step's last row, the others fed
// one per step (teacher forcing), so every scored token attends to its window's earlier tokens
// through the KV cache in the chosen format, as a generated token would; the format's defaults
// and flags are a run's (policy/plan.h): with smoothed keys (--cache-keys smoothed) the prompt's
// keys fit the smoothing, and --cache-sink and --cache-window keep each window's first and most
// recent tokens exact. Windows run on the engine (OffloadGenerator, everything in device memory),
// --batch-size full windows at a time and a shorter last window alone after them, so no window
// is padded and none changes another's score. A last window of --prompt
// tokens or fewer is skipped. Prints the perplexity exp(mean negative log-likelihood) and the
// number of scored tokens: the windows' tokens (BOS included) minus windows x --prompt.
#pragma once

#include <string>

#include "src/cli/policy_flags.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

struct PerplexityOptions {
  std::string model;             // path; empty: the default model
  std::string input;             // UTF-8 text file
  int window = 1024;             // tokens per window; at most the model's context length
  int threads = 0;               // CPU threads; 0: all cores
  bool compress_cache = false;   // 4-bit KV cache
  int batch_size = 8;            // windows scored together (one micro-batch)
  int prompt = 64;               // tokens per window fed as one prefill step, not scored;
                                 // window >= prompt + 1
  CacheFormatFlags cache;        // with compress_cache: its format (src/cli/policy_flags.h);
                                 // unset: a plan's defaults
  bool compress_weight = false;  // 4-bit weights, expanded to fp32 a layer at a time
  std::string device = "auto";  // --device, --activations and --gpu-memory
  std::string activations = "auto";  // (src/cli/device_flags.h)
  int64_t gpu_memory_bytes = 0;
};

// Registers the `perplexity` subcommand and its flags on `app`, filling *options when parsed.
CLI::App* AddPerplexityCommand(CLI::App& app, PerplexityOptions* options);

// Runs it; returns the process exit code (src/cli/exit_codes.h). The result goes to stdout as
// `perplexity P over N tokens`; progress and errors go to stderr.
int PerplexityCommand(const PerplexityOptions& options);

}  // namespace strata
