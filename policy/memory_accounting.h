// Memory accounting: every byte a run allocates, per tier, for a (model, workload, plan). This is
// the one function both the search and the runtime use — the search to decide what fits, the
// executor to size its allocations — so a plan that fits on paper fits in practice.
//
// What is counted (all allocated once, for the whole run, at their largest size):
//   homes       weights (split by rows, policy/weight_layout.h), the KV cache of one block and the
//               hidden states of its micro-batches, each split over tiers by the plan's percents;
//   staging     GPU buffers that receive what lives off the GPU (double-buffered so the next
//               load overlaps the current compute) and the CPU's pinned disk ring and
//               CPU-attention cache buffers;
//   workspace   the intermediates of one micro-batch on the GPU (and the CPU-attention scratch).
// Homes of the KV cache are split per (layer, micro-batch) slice by (sequence, KV head) rows;
// activations per micro-batch by token rows. Thread-compatible pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/linear_form.h"
#include "policy/plan.h"
#include "policy/weight_layout.h"
#include "policy/workload.h"
#include "src/core/status.h"

namespace strata {

enum class Tier { kGpu = 0, kCpu = 1, kDisk = 2 };
inline constexpr int kNumTiers = 3;
const char* TierName(Tier tier);  // "GPU", "CPU", "disk"

struct TierBytes {
  int64_t gpu_bytes = 0;
  int64_t cpu_bytes = 0;
  int64_t disk_bytes = 0;

  int64_t& at(Tier t) { return t == Tier::kGpu ? gpu_bytes : t == Tier::kCpu ? cpu_bytes : disk_bytes; }
  int64_t at(Tier t) const { return const_cast<TierBytes*>(this)->at(t); }
  int64_t sum() const { return gpu_bytes + cpu_bytes + disk_bytes; }
  TierBytes& operator+=(const TierBytes& o);
};

// `copies` identical units of `rows` rows of `row_bytes` each, every unit split the same way:
// rows [0, gpu_rows) on the GPU, the next cpu_rows on the CPU, disk_rows on disk.
struct RowSplit {
  int64_t copies = 0;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int64_t gpu_rows = 0;
  int64_t cpu_rows = 0;
  int64_t disk_rows = 0;
  TierBytes bytes() const;
};

// One allocation the executor makes: `count` buffers of `bytes` each on `tier`.
struct NamedBuffer {
  std::string name;
  Tier tier = Tier::kGpu;
  int64_t bytes = 0;
  int count = 1;
  bool staging = true;  // staging (moves data between tiers) or workspace (compute scratch)
};

// The disk staging ring in pinned CPU memory, present when anything lives on disk.
inline constexpr int64_t kDiskRingBytes = int64_t{64} << 20;

struct MemoryPlan {
  std::vector<LayerPlacement> weight_layers;  // input embedding, transformer (x count), output
  RowSplit kv_cache;     // copies: num_layers * num_gpu_batches; a row holds K and V of one
                         // (sequence, KV head) for workload.max_len() tokens
  RowSplit activations;  // copies: num_gpu_batches; a row is one prompt token's hidden state
  std::vector<NamedBuffer> buffers;  // staging and workspace

  TierBytes weight_bytes;
  TierBytes kv_cache_bytes;
  TierBytes activation_bytes;
  TierBytes staging_bytes;
  TierBytes workspace_bytes;
  TierBytes total_bytes;  // the sum of the five rows above: the run's peak per tier
};

// Bytes of one token's K (or V) vector for one KV head as the cache stores it: fp16/fp32, or the
// 4-bit format of kernels/kv_q4_format.h (codes head_dim/2 + an fp16 scale and minimum per group
// of min(64, head_dim)).
int64_t KvHeadTokenBytes(const ModelSpec& model, bool compress_cache);

// The accounting. InvalidArgument when the plan, model or workload does not validate, and
// Unsupported for a 4-bit cache whose head_dim the format cannot group.
Result<MemoryPlan> AccountMemory(const ModelSpec& model, const Workload& workload,
                                 const Plan& plan);

// The accounting as affine functions of the placement fractions for the plan's gpu_batch_size,
// num_gpu_batches and flags (its percents are ignored). Each is at least the exact figure up to
// row rounding; the search's linear program constrains these and re-checks AccountMemory.
struct LinearMemory {
  LinearForm gpu_bytes;
  LinearForm cpu_bytes;
  LinearForm disk_bytes;
};
LinearMemory LinearMemoryOf(const ModelSpec& model, const Workload& workload, const Plan& plan);

// "17.52 GB" (decimal gigabytes), "512.0 MB" or "4096 B".
std::string FormatBytes(int64_t bytes);

}  // namespace strata
