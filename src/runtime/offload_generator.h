// OffloadGenerator: Generator's contract (generator.h) on the offloading engine — weights, KV
// cache and hidden states placed over GPU, pinned CPU memory and disk by a Plan, each block run
// in FlexGen's zig-zag order by BlockExecutor. The one engine: every command runs on it. For a
// fixed seed its tokens are the same whatever the plan, and those of the frozen reference engine
// whatever the plan (tests/runtime/policy_matrix_test.cc).
//
//   OffloadOptions o;
//   o.plan = *PlanFromFlexGenPercent({20, 80, 0, 100, 0, 100}, 4, 2);
//   o.tiers.offload_dir = "/nvme/strata";
//   OffloadGenerator gen(model, *backend, tokenizer, EndOfGenerationIds(tokenizer, config), o);
//   std::vector<GenerationResult> out = gen.Generate(block);
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "src/memory/memory_tiers.h"
#include "src/runtime/executor.h"
#include "src/runtime/generation.h"
#include "src/schedule/block_schedule.h"

namespace strata {

struct OffloadOptions {
  Plan plan;                 // must validate; 4-bit weights are not run yet (the 4-bit cache is)
  MemoryTiersOptions tiers;  // device capacity, offload directory, file environment
  ExecutorOptions executor;  // jitter, for tests
  // The tiers are sized for blocks of prompts up to prompt_len tokens generating up to gen_len
  // tokens; a block that needs more re-sizes them (and logs it), at least doubling the sizes
  // where that fits. 0: the first block's sizes.
  int prompt_len = 0;
  int gen_len = 0;
  // Keep every block's spans for WriteTrace(). Default off.
  bool keep_trace = false;
  // Host memory the tiers may take, the device tier's included (this engine keeps it in host
  // memory): a placement that needs more is refused before anything is allocated
  // (policy/fit_check.h, CheckHostMemory). -1 (the default): what the machine has available when
  // the tiers are set up (MemAvailable, src/core/host_memory.h).
  int64_t host_memory_bytes = -1;
};

// Thread-compatible.
class OffloadGenerator {
 public:
  // REQUIRES: model, the backends and tokenizer outlive the generator; `backend` is the
  // device's, `cpu_backend` the CPU's (CPU attention runs on it; never the same object).
  OffloadGenerator(const Model& model, Backend& backend, Backend& cpu_backend,
                   const Tokenizer& tokenizer,
                   std::vector<int32_t> eog_ids, OffloadOptions options);
  ~OffloadGenerator();

  // Generates for every request, gpu_batch_size * num_gpu_batches sequences at a time (a shorter
  // last block runs fewer or shorter micro-batches). Errors: the plan or tiers cannot be set up
  // (e.g. ResourceExhausted for the device capacity or for more host memory than
  // options.host_memory_bytes, with a plan that fits; NotFound for the offload directory), or a
  // disk transfer failed.
  // Prompts of different lengths are left-padded to the longest; padding never changes a
  // sequence's result (masked keys, positions counted from each sequence's first real token).
  // REQUIRES: each prompt non-empty; prompt + TokensToGenerate() fits the model's context.
  Result<std::vector<GenerationResult>> TryGenerate(const std::vector<GenerationRequest>& block);
  // TryGenerate for callers that treat a failure as fatal: aborts with its message.
  std::vector<GenerationResult> Generate(const std::vector<GenerationRequest>& block);

  // Once *cancel is true, TryGenerate stops before its next token step (every lane of the
  // executor ends; no thread outlives the call) and returns every result with reason
  // kCancelled. nullptr (the default): never.
  // REQUIRES: *cancel outlives this.
  void set_cancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }

  // The schedule a block of `sequences` prompts of `prompt_len` tokens generating `gen_len`
  // tokens runs, for --dump-schedule. Errors as TryGenerate's setup.
  Result<BlockSchedule> ScheduleFor(int sequences, int prompt_len, int gen_len);

  // Summed over every block run so far (peaks: the largest).
  const ExecutorMetrics& metrics() const { return metrics_; }
  // How many times the tiers were set up so far (each time every weight is copied home), and the
  // seconds that took.
  int placements() const { return placements_; }
  double placement_s() const { return placement_s_; }
  // The spans of every block run so far, one after another. REQUIRES: options.keep_trace.
  Status WriteTrace(const std::string& path) const;

 private:
  struct Engine;
  // Makes sure the engine holds blocks of this size; re-places when it does not, at least
  // doubling its sizes (within the model's context) where that fits.
  Status Prepare(int prompt_len, int max_len);
  // Places blocks of exactly this size: new tiers, every weight copied home.
  Status Place(int prompt_len, int max_len);
  // Ok when `placement` (for blocks of this size) fits options_.host_memory_bytes: by the plan's
  // accounting (CheckHostMemory), whose per-tier totals go to *planned ({-1, -1, -1} when it
  // cannot describe the model), else by the layout's arenas.
  Status CheckHostMemoryFor(const Placement& placement, int prompt_len, int max_len,
                            TierBytes* planned) const;
  Result<std::vector<GenerationResult>> RunBlock(const std::vector<GenerationRequest>& block);
  ScheduleShape ShapeFor(int micro_batches, int tokens) const;
  bool Cancelled() const;

  const Model& model_;
  Backend& backend_;
  Backend& cpu_backend_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eog_ids_;
  OffloadOptions options_;
  std::unique_ptr<Engine> engine_;
  ExecutorMetrics metrics_;
  std::vector<TraceSpan> trace_;
  const std::atomic<bool>* cancel_ = nullptr;
  int placements_ = 0;
  double placement_s_ = 0;
};

}  // namespace strata
