// Memory accounting: every byte a run allocates, per tier, for a (model, workload, plan). This is
// the one function both the search and the runtime use — the search to decide what fits, the
// executor to size its allocations — so a plan that fits on paper fits in practice. Each term
// below is one reservation of the executor's layout (src/memory/placement.h) or one of its
// compute workspaces; a test holds the executor's per-tier peak to total_bytes (docs/DESIGN.md,
// rule 2).
//
// What is counted (all allocated once, for the whole run, at their largest size):
//   homes       weights (split by rows, policy/weight_layout.h), the KV cache of one block and the
//               hidden states of its micro-batches, each split over tiers by the plan's percents;
//   staging     GPU:  weight_staging  2 slots, each the largest of the whole bytes of the tensors
//                                     with an off-GPU row of one assembled unit: the input layer,
//                                     a block's attention half, its MLP half, the output layer
//                                     (a tied embedding included); tensors lie at 64-byte offsets;
//                     kv_staging      2 slots of a slice's off-GPU rows (prompt_len slots per row
//                                     under CPU attention, else max_len);
//               CPU:  disk_ring       the pinned bounce buffer for disk transfers, DiskRingBytes;
//                     cpu_attention_cache  CPU attention: 2 slots of a slice's disk rows, each
//                                     rounded up to kLayoutDiskAlignment;
//   workspace   GPU:  transformer_workspace  the Transformer's buffers, all held at once, for one
//                                     micro-batch's prefill rows: rows x (2 hidden + 2 heads *
//                                     head_dim + 2 kv_heads * head_dim + intermediate x (2 if
//                                     gated, else 1)) activation elements;
//                     activation_slots 2 GPU copies of a micro-batch's hidden states, when any row
//                                     lives off the GPU;
//                     logits, last_hidden  [gpu_batch_size, vocab] fp32 and [gpu_batch_size,
//                                     hidden] activations of the micro-batch computing;
//                     expanded_weights fp32 copy of the largest compute layer (4-bit weights);
//                     kv_prefill       4-bit cache: the fp32 keys and values of one
//                                     sequence's prompt, which its prefill attends to;
//                     kv_smoothing     smoothed 4-bit keys: the fp32 channel mean and scale of
//                                     every (layer, sequence of the block, KV head), 2 x head_dim
//                                     floats each, resident where the layers compute;
//                     kv_exact         exact tokens of the 4-bit cache (plan cache_sink and
//                                     cache_window): fp32 keys and values of each (layer,
//                                     sequence of the block, KV head)'s sink and window rows,
//                                     resident where the layers compute;
//               CPU:  cpu_attention_workspace  CPU attention: 2 x queries, outputs, keys and
//                                     values of one micro-batch's decode step;
//                     kv_exact_cpu     CPU attention with exact tokens: the kv_exact rows of the
//                                     off-GPU cache rows, where the CPU attends them (the GPU's
//                                     kv_exact keeps every row: the prefill writes them there);
//   alignment   padding of the layout: arena reservations at kLayoutArenaAlignment, disk extents (each
//               layer's disk weights, each KV slice's and micro-batch's disk rows) rounded up to
//               kLayoutDiskAlignment for O_DIRECT. Counted per reservation as its rounding up,
//               so it bounds the layout's padding from above (by under one alignment unit).
// Homes of the KV cache are split per (layer, micro-batch) slice by (sequence, KV head) rows;
// activations per micro-batch by token rows. Thread-compatible pure functions.
#pragma once

#include <array>
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

  int64_t& at(Tier t) {
    return t == Tier::kGpu ? gpu_bytes : t == Tier::kCpu ? cpu_bytes : disk_bytes;
  }
  int64_t at(Tier t) const {
    return t == Tier::kGpu ? gpu_bytes : t == Tier::kCpu ? cpu_bytes : disk_bytes;
  }
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

// Alignment of reservations in the GPU and CPU arenas, and of disk extents (O_DIRECT).
inline constexpr int64_t kLayoutArenaAlignment = 64;
inline constexpr int64_t kLayoutDiskAlignment = 4096;
// Largest half of the disk ring: requests of this size keep an NVMe queue busy.
inline constexpr int64_t kDiskRingHalfBytes = int64_t{32} << 20;
// The most the disk staging ring can take.
inline constexpr int64_t kDiskRingBytes = 2 * kDiskRingHalfBytes;

// `n` rounded up to a multiple of `alignment` (a power of two).
constexpr int64_t AlignUpTo(int64_t n, int64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The disk staging ring in pinned CPU memory, present when anything lives on disk: two halves
// (one per moving lane) of the largest disk extent rounded up to kLayoutDiskAlignment plus two
// pages of slack (so an unaligned piece goes in one request), at most kDiskRingHalfBytes each
// (transfers are chunked). 0 when `largest_disk_extent` is 0.
int64_t DiskRingBytes(int64_t largest_disk_extent);

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
  TierBytes alignment_bytes;  // layout padding (see the top of this file)
  TierBytes total_bytes;  // the sum of the six rows above: the run's peak per tier
};

// Whether the 4-bit cache format (kernels/kv_q4_format.h) takes heads of `head_dim`: an even
// head_dim up to 64, a multiple of 64, or 80 or 96 (a group of 64 and a last one of 16 or 32).
bool KvQ4TakesHeadDim(int head_dim);
// The head sizes KvQ4TakesHeadDim takes, in words, for the messages that refuse the others.
inline constexpr const char* kKvQ4HeadDims =
    "an even head_dim up to 64, 80, 96 or a multiple of 64";

// Bytes of one token's key and value for one KV head of `head_dim` in each plane of the cache as
// `plan` stores them: K then V, one plane each of `dtype_bytes` elements, or
// (plan.compress_cache) codes then params each in the 4-bit format of kernels/kv_q4_format.h:
// head_dim/2 bytes of codes, an fp16 scale and minimum per group of 64 (one group up to 64, the
// last one shorter at 80 and 96), and for keys by channel (plan.channel_keys()) the key params of
// a group of kChannelKeyGroup slots spread over them: 2 * ceil(2 * head_dim / kChannelKeyGroup)
// bytes a slot up to 64, 4 * ceil(head_dim / 32) above (an even number of halves). An fp plane's
// params are 0. The executor's cache layout (src/memory's KvFormatOf) is built from this.
// REQUIRES: KvQ4TakesHeadDim(head_dim) when plan.compress_cache.
std::array<int64_t, 4> KvHeadTokenPlaneBytes(int head_dim, int dtype_bytes, const Plan& plan);
// Their sum for `model`'s heads in its activation dtype: one token's key and value for one KV
// head.
int64_t KvHeadTokenBytes(const ModelSpec& model, const Plan& plan);

// The accounting. InvalidArgument when the plan, model or workload does not validate or the
// model's weights are stored 4-bit (model.q4_weights) and the plan does not compress them, and
// Unsupported for a 4-bit cache whose head_dim the format cannot group (or, for rotated keys, is
// not a power of two).
Result<MemoryPlan> AccountMemory(const ModelSpec& model, const Workload& workload,
                                 const Plan& plan);

// The accounting as affine functions of the placement fractions for the plan's gpu_batch_size,
// num_gpu_batches and flags (its percents are ignored). Each matches the exact figure up to row
// rounding, alignment padding, the disk ring (counted at its largest) and the staging slots,
// which hold whole tensors or micro-batches (counted in proportion to what lives off the GPU:
// exact with nothing or everything off it); the search's linear program constrains these and
// re-checks AccountMemory.
struct LinearMemory {
  LinearForm gpu_bytes;
  LinearForm cpu_bytes;
  LinearForm disk_bytes;
};
LinearMemory LinearMemoryOf(const ModelSpec& model, const Workload& workload, const Plan& plan);

// "17.52 GB" (decimal gigabytes), "512.0 MB" or "4096 B".
std::string FormatBytes(int64_t bytes);

}  // namespace strata
