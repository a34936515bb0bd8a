// JobMetrics: what one `strata run` did, written as JSON by `--metrics FILE` when the run ends
// (finished or interrupted). Plain data; the runner fills it as blocks finish.
//
// The JSON (every rate is per second of generation time, every size in bytes):
//   {"model", "input", "output", "shard", "exit_code", "interrupted", "interrupt_signal",
//    "elapsed_s", "load_s", "placement_s", "generation_s",
//    "requests": {"completed", "failed", "already_done", "other_shard", "not_run",
//                 "by_finish_reason": {"stop", "length"}, "by_error_code": {code: count}},
//    "tokens": {"prompt", "generated", "total"},
//    "throughput": {"prompt_tokens_per_s", "generated_tokens_per_s", "total_tokens_per_s"},
//    "blocks": {"count", "sort_window", "block_size"},
//    "padding": {"prompt_tokens", "prompt_slots", "prompt_waste",
//                "decode_tokens", "decode_slots", "decode_waste"},
//    "journal": {"recover_s", "write_s", "share_of_elapsed"},
//    "memory": {"peak_rss_bytes", "peak_bytes": {"gpu", "cpu", "disk"}},
//    "links": {"bytes": {"disk_to_cpu", "cpu_to_disk", "cpu_to_gpu", "gpu_to_cpu"}},
//    "lanes": {"profile", "times": [{"phase", "layer", "lane", "predicted_s", "measured_s"}],
//              "phases": [{"phase", "predicted_s", "measured_s"}]}}
// memory.peak_bytes and links.bytes are null until the offloading executor reports them; lanes
// is empty without it, and predicted_s and profile are null when no hardware profile was used.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

// Padding waste of the blocks run. A block computes block_rows x longest prompt positions in
// prefill and block_rows x its decode steps in decode, whatever each sequence needs.
struct PaddingStats {
  uint64_t prompt_tokens = 0;  // real prompt tokens
  uint64_t prompt_slots = 0;   // rows x longest prompt, summed over blocks
  uint64_t decode_tokens = 0;  // generated tokens
  uint64_t decode_slots = 0;   // rows x decode steps (the longest generation), summed

  // Adds one block: each row's prompt length and generated token count.
  void AddBlock(const std::vector<int>& prompt_lens, const std::vector<int>& generated);
  double prompt_waste() const;  // 1 - prompt_tokens / prompt_slots; 0 when nothing ran
  double decode_waste() const;  // 1 - decode_tokens / decode_slots; 0 when nothing ran
};

// Bytes per tier or per link, for the offloading executor to fill; nullopt is written as null.
struct TierPeakBytes {
  std::optional<uint64_t> gpu, cpu, disk;
};
struct LinkBytes {
  std::optional<uint64_t> disk_to_cpu, cpu_to_disk, cpu_to_gpu, gpu_to_cpu;
};

// An executor lane's busy seconds for one kind of layer in one phase of an offloaded run, next
// to the cost model's prediction (src/cli/lane_report.h).
struct LaneTime {
  std::string phase;  // "prefill", "decode"
  std::string layer;  // "input", "transformer", "output"
  std::string lane;   // "load", "compute", "store", "cpu"
  std::optional<double> predicted_s;
  double measured_s = 0;
};

// The wall seconds of one phase of an offloaded run (every block's prefill, or every block's
// decode), next to the cost model's prediction for the same blocks (src/cli/lane_report.h).
struct PhaseTime {
  std::string phase;  // "prefill", "decode"
  std::optional<double> predicted_s;
  double measured_s = 0;
};

struct JobMetrics {
  std::string model, input, output, shard;
  int exit_code = 0;
  bool interrupted = false;
  std::string interrupt_signal;  // "SIGTERM", ...; empty when not interrupted
  // placement_s: setting up the tiers and copying every weight home (once, and again only when a
  // block outgrows them), which generation_s leaves out, as it leaves out loading.
  double elapsed_s = 0, load_s = 0, placement_s = 0, generation_s = 0;

  uint64_t completed = 0, failed = 0, already_done = 0, other_shard = 0;
  uint64_t not_run = 0;  // read but not finished when the run was interrupted
  std::map<std::string, uint64_t> finish_reasons;  // "stop" / "length" -> count
  std::map<std::string, uint64_t> error_codes;     // error code -> count

  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t blocks = 0;
  int block_size = 0, sort_window = 0;
  PaddingStats padding;
  double journal_recover_s = 0, journal_write_s = 0;

  uint64_t peak_rss_bytes = 0;
  TierPeakBytes peak_bytes;  // filled by the offloading executor
  LinkBytes link_bytes;  // filled by the offloading executor
  std::string lane_profile;      // the hardware profile of the predictions; empty: none
  std::vector<LaneTime> lane_times;  // filled by the offloading executor
  std::vector<PhaseTime> phase_times;  // filled by the offloading executor
};

// The JSON text above, pretty-printed.
std::string MetricsJson(const JobMetrics& m);

// Writes MetricsJson(m) to `path` through a temporary file and a rename, so a reader never sees
// half a file. Errors: IoError naming the path.
Status WriteMetricsFile(const std::string& path, const JobMetrics& m);

// The peak resident set size of this process so far (getrusage), in bytes.
uint64_t PeakRssBytes();

}  // namespace strata
