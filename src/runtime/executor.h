// BlockExecutor: replays a BlockSchedule for one block on four lanes — load, compute, store and
// CPU — each a thread running its steps in list order. The load, compute and store lanes each
// give their work to a stream of the device backend (src/backend/memory.h). Each step records an
// event on its lane's stream once it has been given; a step waits only on the events of the
// steps its buffers need (the schedule's waits): its thread waits until each such step has been
// given (so that an event is recorded before anyone waits on it, as CUDA requires), then its
// stream waits on the event. Never a device-wide sync or a queue join; disk transfers go through
// the FileEnv's own threads or ring. Once every sequence of the block has stopped, the remaining
// token steps are skipped.
//
// The CPU lane runs CPU delegation's attention (StepKind::kCpuAttention) on the CPU backend's
// stream, while the compute lane queues other micro-batches' device work. The CPU can compute only
// once the bytes are there, so its thread host-waits the events of the steps it waits for (the
// copies of its queries, keys and values to host memory; a cache load or store on the other
// lanes), then runs its work to completion, then records its event on a device stream of its own
// that is never given work, so that the lanes after it wait for it as for any other lane.
//
// Every step also checks, as it starts, that each buffer it touches was last written by the step
// the schedule says and is not being written by another lane (and, when it writes, not being
// read): a lane that ran ahead of its waits aborts with file:line instead of computing on stale
// data.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/placement.h"
#include "src/runtime/executor_compute.h"
#include "src/runtime/executor_trace.h"
#include "src/runtime/executor_transfers.h"
#include "src/schedule/block_schedule.h"

namespace strata {

struct ExecutorOptions {
  // Tests: each step sleeps a random 0..jitter_us microseconds before it runs, which reorders
  // lanes as far as their waits allow. Default 0.
  int jitter_us = 0;
  uint32_t jitter_seed = 1;
  // Once *cancel is true, each lane skips every step of a token later than the one it has
  // reached (the running steps finish, the lanes end, Run returns ok); the block's results
  // are then incomplete. nullptr (the default): never. REQUIRES: *cancel outlives Run.
  const std::atomic<bool>* cancel = nullptr;
  // Tests: a step for which this returns true skips its waits, so that a test can show that a
  // missing wait is caught (the step aborts on its buffer checks). Default: none.
  std::function<bool(const Step&)> skip_waits;
  // Tests: a step for which this returns true gives its stream none of its waits (its thread still
  // waits until the steps it needs were given; a CPU-lane step does not host-wait their events),
  // so that a test can show that the streams' events are what orders their work. Default: none.
  std::function<bool(const Step&)> skip_stream_waits;
};

// Thread-compatible: one Run at a time.
class BlockExecutor {
 public:
  // REQUIRES: all outlive the executor; `tiers` holds `placement`'s layout with the weights home.
  // The schedules Run replays split decode attention (ScheduleShape::cpu_attention_decode) only
  // when the placement delegates it to the CPU.
  BlockExecutor(const Model& model, Backend& device_backend, Backend& cpu_backend,
                const Placement& placement, const MemoryTiers& tiers);

  // Runs `schedule` for `run` and fills the sequences' results. Spans of every lane go to
  // `records` (one per lane), times to `metrics`. Errors are the first transfer that failed; the
  // block's results are then incomplete.
  Status Run(const BlockSchedule& schedule, BlockRun& run, const ExecutorOptions& options,
             std::vector<LaneRecord>& records, ExecutorMetrics& metrics);

 private:
  Status Execute(const Step& step, const BlockSchedule& schedule, BlockRun& run, Stream& stream,
                 LaneRecord& record);

  Backend& device_;
  const Placement& p_;
  const int position_offset_;  // ModelConfig's, for the input embedding's rows
  BlockCompute compute_;
  BlockTransfers transfers_;
};

}  // namespace strata
