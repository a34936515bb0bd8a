// Placement: where every byte of a run lives — weights (weight_placement.h), the KV cache of each
// (block, micro-batch) slice, the hidden states of each micro-batch, and the working buffers the
// executor moves them through — as extents of a TierLayout, derived from a Plan alone. It is
// plain data: nothing is allocated here (memory_tiers.h does that, once, from the layout).
//
// Activations (hidden states, the Transformer's buffers, a dense KV cache, expanded 4-bit
// weights) are elements of the device backend's activation type (Backend::ActivationType:
// fp32, fp16 or bf16), Placement::activation_type; logits, smoothing and exact rows are fp32.
//
// KV cache: a slice holds gpu_batch_size * num_kv_heads rows, row r being (sequence r / kv_heads,
// KV head r % kv_heads) with `max_len` slots, for K and again for V; a slot is head_dim
// activation values, or with compress_cache one token in the 4-bit format of
// kernels/kv_q4_format.h (codes and an fp16 scale and minimum per group). Rows split over the
// tiers as the accounting splits them; each tier's rows of a slice lie in one extent as planes
// (KvFormat): K rows then V rows, and for 4 bits K codes, K params, V codes, V params, so that the
// rows of a sequence are the planes the 4-bit attention kernel reads. Attention works row by row,
// so the GPU rows stay in their home and only the others pass through a cache slot.
// Activations: a micro-batch's hidden states are gpu_batch_size * prompt_len token rows of
// hidden_size activation values, split by rows the same way; when any row is off the GPU each
// layer works in an activation slot that the load and store lanes fill from and drain to the
// homes.
#pragma once

#include <cstdint>
#include <vector>

#include "policy/plan.h"
#include "src/backend/memory.h"
#include "src/backend/shapes.h"
#include "src/memory/tier_layout.h"
#include "src/memory/weight_placement.h"
#include "src/model/model.h"

namespace strata {

// Rows [0, gpu) on the GPU, [gpu, gpu + cpu) on the CPU, the rest on disk: the accounting's
// cumulative rounding of whole percents (policy/memory_accounting.h, RowSplit).
struct TierRows {
  int64_t rows = 0, gpu = 0, cpu = 0, disk = 0;
  int64_t off_gpu() const { return cpu + disk; }
};
TierRows SplitRows(int64_t rows, int gpu_percent, int cpu_percent);

// The block a placement is sized for.
struct BlockShape {
  int gpu_batch_size = 1;     // sequences per micro-batch
  int num_micro_batches = 1;
  int prompt_len = 1;         // longest (padded) prompt
  int max_len = 2;            // prompt_len + tokens generated: KV slots per sequence
};

// One unit's rows on each tier (a KV slice: its KvFormat planes in each extent).
struct TierExtents {
  GpuExtent gpu;
  CpuExtent cpu;
  DiskExtent disk;
};

// How a K (or V) row stores a slot: in one part (dense: head_dim elements of `element`) or two
// (4 bits: the codes, head_dim / 2 bytes, then the params, 4 bytes per group of 64 or fewer
// channels, or for keys by channel their group's params spread over its slots; see
// KvHeadTokenPlaneBytes). A buffer of `rows` rows of `len` slots lies as 2 * parts planes
// [rows, len, part bytes], K's parts then V's.
struct KvFormat {
  bool q4 = false;
  SpanType element = SpanType::kF32;      // dense: the activations' type
  int parts = 1;                          // planes of K (and of V): fp32, or codes and params
  int64_t plane_bytes[4] = {0, 0, 0, 0};  // bytes of one slot in each plane: K's, then V's

  int planes() const { return 2 * parts; }
  int64_t plane_slot_bytes(int plane) const { return plane_bytes[plane]; }
  // One K slot and one V slot.
  int64_t slot_bytes() const {
    return plane_bytes[0] + plane_bytes[1] + plane_bytes[2] + plane_bytes[3];
  }
  // Where plane `plane` begins in a buffer of `rows` rows of `len` slots.
  int64_t PlaneOffset(int plane, int64_t rows, int64_t len) const {
    int64_t before = 0;
    for (int p = 0; p < plane; ++p) before += plane_bytes[p];
    return rows * len * before;
  }
};
// The format of `head_dim` heads as `plan` stores them, 4-bit or dense in `activations`: what
// policy/memory_accounting.h's KvHeadTokenPlaneBytes counts per slot.
KvFormat KvFormatOf(int head_dim, const Plan& plan, SpanType activations = SpanType::kF32);

struct CachePlacement {
  TierRows rows;              // of one slice
  KvFormat format;
  int head_dim = 0;
  int max_len = 0;
  int64_t row_bytes = 0;      // one K row and one V row: max_len * format.slot_bytes()
  int staging_len = 0;        // slots per row in a cache slot: max_len, or prompt_len when only
                              // the prefill passes through it (CPU attention)
  std::vector<TierExtents> slices;  // [block * num_micro_batches + k]
  GpuExtent slots[2];         // GPU: the off-GPU rows of the slice computing, in its planes
  CpuExtent cpu_slots[2];     // CPU attention: the disk rows of a decode step, laid as on disk
  CpuExtent cpu_workspace[2];  // CPU attention: queries, outputs, then the step's keys and
                               // values (activations) of one micro-batch
  GpuExtent prefill;          // GPU, 4-bit cache: the prompt's keys and values (activations) of one
                              // sequence, [kv_heads, prompt_len, head_dim] each, that the
                              // prefill attends to (one sequence at a time)
  GpuExtent smoothing;        // GPU, smoothed keys: per (layer, sequence of the block, KV head)
                              // the fp32 channel means then scales, [layers, block, kv_heads,
                              // head_dim] each; fitted at the prefill and kept where the layers
                              // compute (never moved), so only the queries meet them
  GpuExtent exact;            // GPU, exact tokens (plan.exact_tokens()): kernels/cpu/
                              // attention_q4.h's Q4ExactRows keys then values, [layers, block,
                              // kv_heads, sink + window, head_dim] each; written as tokens are
                              // and never moved, like the smoothing
  CpuExtent exact_cpu;        // CPU attention with exact tokens: the exact rows of each slice's
                              // off-GPU rows, [layers, micro-batches, off-GPU rows, sink +
                              // window, head_dim] keys then values, where the CPU attends them
};

struct ActivationPlacement {
  TierRows rows;              // of one micro-batch
  int64_t row_bytes = 0;      // hidden_size activation values
  std::vector<TierExtents> homes;  // [k]; one extent per tier
  GpuExtent slots[2];         // GPU working buffers; bytes 0 when every row is on the GPU
};

struct Placement {
  Plan plan;
  BlockShape shape;
  SpanType activation_type = SpanType::kF32;  // the device backend's activation type
  TierLayout layout;
  WeightPlacement weights;
  CachePlacement cache;
  ActivationPlacement activations;
  GpuExtent weight_slots[2];  // GPU; bytes 0 when every weight is on the GPU
  GpuExtent expanded_weights;  // GPU: one scheduling layer's 4-bit weights as activations
                               // (bytes 0 without plan.compress_weight)
  GpuExtent transformer_workspace;  // GPU: the Transformer's buffers (TransformerWorkspaceBytes)
  GpuExtent logits;           // GPU: [gpu_batch_size, vocab] of the micro-batch computing
  GpuExtent last_hidden;      // GPU: [gpu_batch_size, hidden] rows the logits come from
  CpuExtent disk_ring;        // CPU: 4 KiB-aligned bounce buffer for disk transfers, one half per
                              // moving lane; bytes 0 when nothing lives on disk
  OpLimits op_limits;         // the largest op the block gives the device's backend (OpLimitsOf):
                              // its scratch, outside the layout (Backend::ScratchBytes)
};

// Bytes of the Transformer's buffers (src/runtime/transformer.h) for steps of up to `max_rows`
// token rows, all held at once: rows x (2 hidden + 2 heads * head_dim + 2 kv_heads * head_dim +
// intermediate x (2 if gated, else 1)) values of `activations`, as policy/memory_accounting.h
// counts them.
uint64_t TransformerWorkspaceBytes(const ModelConfig& config, int64_t max_rows,
                                   SpanType activations = SpanType::kF32);

// The largest op a block of `shape` gives the device's backend under `plan`, for the scratch it
// reserves (Backend::ScratchBytes, src/backend/shapes.h): a micro-batch's prefill rows, the
// model's widest and largest Linear, its vocabulary, heads and the block's cache length, the
// plan's 4-bit cache format, the activations' type; half_weights when a tensor of the model is
// F16 or BF16 (even one that 4-bit weights expand to fp32: a bound, not an exact count); with
// half `activations`, the largest Linear weight of another type (4-bit ones expand to theirs).
OpLimits OpLimitsOf(const Model& model, const Plan& plan, const BlockShape& shape,
                    SpanType activations = SpanType::kF32);

// Places a block of `shape` by `plan`, its activations in `activations`. Unsupported for a 4-bit
// cache the model's head_dim cannot be grouped for (or rotated keys a head_dim that is not a
// power of two), InvalidArgument for a plan or shape that does not validate, or a model with
// 4-bit weights (Model::has_q4_weights) and a plan without compress_weight.
Result<Placement> PlaceBlock(const Model& model, const Plan& plan, const BlockShape& shape,
                             SpanType activations = SpanType::kF32);

}  // namespace strata
