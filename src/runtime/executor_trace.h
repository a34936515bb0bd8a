// What the executor did, for people: spans on four lane tracks (load, compute, store, cpu) and
// five link tracks (disk→CPU, CPU→GPU, GPU→GPU, GPU→CPU, CPU→disk), written as Chrome trace events
// (open in Perfetto or chrome://tracing), and the run's metrics: bytes and busy time per link,
// busy time per lane, peak bytes per tier next to the plan's, and the overlap achieved.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/memory_accounting.h"
#include "src/core/status.h"
#include "src/schedule/block_schedule.h"

namespace strata {

enum class Link : uint8_t { kDiskToCpu, kCpuToGpu, kGpuToGpu, kGpuToCpu, kCpuToDisk };
inline constexpr int kNumLinks = 5;
const char* LinkName(Link link);  // "disk->CPU", ...

// A span on a track: a lane (0..kNumLanes - 1, by Lane) or a link (kNumLanes + Link).
struct TraceSpan {
  int track = 0;
  std::string name;
  double start_us = 0;  // since the block started
  double dur_us = 0;
  uint64_t bytes = 0;   // links only
  int role = -1;        // lane steps: the LayerRole of the step's layer; -1 for links
  int token = -1;       // lane steps: the token step (0: prefill)
};

// One lane's spans. Only its lane appends, so no lock is needed; read after the lanes joined.
class LaneRecord {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LaneRecord(Clock::time_point origin) : origin_(origin) {}

  // Microseconds since the block started.
  double NowUs() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - origin_).count();
  }
  void AddStep(Lane lane, LayerRole role, int token, std::string name, double start_us,
               double end_us) {
    spans_.push_back({static_cast<int>(lane), std::move(name), start_us, end_us - start_us, 0,
                      static_cast<int>(role), token});
  }
  void AddTransfer(Link link, double start_us, double end_us, uint64_t bytes) {
    spans_.push_back({kNumLanes + static_cast<int>(link), LinkName(link), start_us,
                      end_us - start_us, bytes});
  }
  // One scheduling layer's 4-bit weights expanded.
  void CountWeightExpansion() { ++weight_expansions_; }
  const std::vector<TraceSpan>& spans() const { return spans_; }
  int64_t weight_expansions() const { return weight_expansions_; }

 private:
  Clock::time_point origin_;
  std::vector<TraceSpan> spans_;
  int64_t weight_expansions_ = 0;
};

// Phases of a block: the prefill (token step 0) and the decode (every later token step).
enum class Phase : uint8_t { kPrefill = 0, kDecode = 1 };
inline constexpr int kNumPhases = 2;
inline constexpr int kNumLayerRoles = 4;  // LayerRole's values
const char* PhaseName(Phase phase);      // "prefill", "decode"

struct ExecutorMetrics {
  double wall_s = 0;     // the block's schedule, first step to last
  double prefill_s = 0;  // until the prefill's last logits (token step 0 done)
  int sequences = 0;
  int prompt_len = 0;    // padded
  int tokens = 0;        // token steps run (the longest generation of the block)
  int blocks = 0;        // blocks run
  std::array<double, kNumLanes> lane_busy_s{};
  // lane_busy_s split by phase and by the role of the step's layer: [phase][role][lane].
  std::array<std::array<std::array<double, kNumLanes>, kNumLayerRoles>, kNumPhases> step_busy_s{};
  std::array<double, kNumLinks> link_busy_s{};
  std::array<uint64_t, kNumLinks> link_bytes{};
  // Scheduling layers whose 4-bit weights were expanded: once per layer (with a 4-bit tensor) per
  // token step, whatever the number of micro-batches.
  int64_t weight_expansions = 0;
  TierBytes peak_bytes;     // what the run held per tier (arenas, scratch file, compute workspace)
  TierBytes planned_bytes;  // the plan's accounting per tier; all -1 when it cannot describe
                            // the model (see ModelSpecOf)

  // Wall time over the busiest lane's busy time: 1.0 when the busiest lane never waited.
  double overlap() const;
  // Adds another block's times and bytes; peaks take the larger.
  void Accumulate(const ExecutorMetrics& other);
  // A few lines for a log or a report.
  std::string ToString() const;
};

// Folds one block's spans into `metrics` (busy times and bytes) and counts the block.
void SumSpans(const std::vector<LaneRecord>& records, ExecutorMetrics& metrics);

// Writes the spans as a Chrome trace JSON file. IoError naming `path` when it cannot be written.
Status WriteChromeTrace(const std::string& path, const std::vector<TraceSpan>& spans);

}  // namespace strata
