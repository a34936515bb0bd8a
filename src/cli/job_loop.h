// The block loop of `strata run`: read a block, generate, write its lines to the journal and
// make them durable, report progress, until the input ends or a signal asks to stop.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "src/core/status.h"
#include "src/job/block_reader.h"
#include "src/job/job_metrics.h"
#include "src/job/output_writer.h"
#include "src/job/progress.h"
#include "src/runtime/generation.h"

namespace strata {

// The generation call of a job: one block of requests in, one result per request out, in order.
// A result with reason kCancelled means the block stopped early and nothing of it is written.
// RunCommand builds it in one line over the engine (OffloadGenerator).
// Runs one block; an error (a failed disk transfer, tiers that cannot be set up) ends the job.
using GenerateBlockFn = std::function<Result<std::vector<GenerationResult>>(
    const std::vector<GenerationRequest>&)>;

struct JobLoop {
  BlockReader* reader = nullptr;
  OutputWriter* writer = nullptr;
  GenerateBlockFn generate;
  const std::atomic<bool>* stop = nullptr;  // set by a signal (interrupt.h)
  ProgressReporter* progress = nullptr;
  std::string model_name;                   // for OpenAI result bodies
  uint64_t already_done = 0;                // result lines the output held at the start
  uint64_t expected_lines = 0;              // estimate of the lines it holds at the end
};

struct JobLoopOutcome {
  Status status;             // the input or output error that ended the job; ok otherwise
  bool interrupted = false;  // stopped by a signal before the input ended
  // Completions of raw prompts (plain lines and /v1/completions, no chat template), and of those
  // the ones that stopped after at most one generated token: an instruct model given raw text
  // often answers with end-of-text at once.
  uint64_t raw_prompt_completions = 0;
  uint64_t raw_prompt_early_stops = 0;
};

// Runs the loop and adds what it did to *metrics (requests, tokens, blocks, padding, journal
// write time, not_run). REQUIRES: every pointer in `loop` is set.
JobLoopOutcome RunJobLoop(const JobLoop& loop, JobMetrics* metrics);

}  // namespace strata
