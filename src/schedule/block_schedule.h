// BlockSchedule: FlexGen's zig-zag order for one block as a plain list of steps. The executor
// replays it; tests inspect it; `--dump-schedule` prints it (schedule_dump.h).
//
// The model is 2L + 2 scheduling layers: the input embedding, then for each of the L transformer
// blocks an attention layer and an MLP layer, then the output layer. For every token step (0 is
// the prefill, then one per decoded token), every scheduling layer and every micro-batch k of the
// block, in that nesting, while micro-batch k of layer j computes the load lane brings in the
// KV cache and hidden states of micro-batch k + 1 and then (while k = 0) the weights of layer
// j + 1, and the store lane sends the cache and hidden states of micro-batch k - 1 home. FlexGen
// loads the weights first, which holds all of a layer's later micro-batches behind the next
// layer's weights; here the second micro-batch never waits for them (the third and later ones
// still do: their inputs need the slots the first ones compute in). The input embedding's load
// brings only the rows of the block's tokens (src/runtime/input_rows.h), so a decode step's load
// waits until the previous token step's output layer has sampled every micro-batch; it is the
// last load of its iteration, so the first attention layer's weights load before it.
//
// Each step names the buffers it reads and writes. The waits are derived from those accesses in
// list order: a step waits for the last writer of every buffer it touches and for every reader
// since then of every buffer it writes. Lanes run their steps in list order, so waits are kept
// only across lanes, and only the latest per lane. Every wait points to an earlier step, so any
// replay that starts the earliest runnable step makes progress (no deadlock).
//
// CPU delegation (FlexGen's CPU attention over the off-GPU cache, shape.cpu_attention_decode):
// a decode attention layer's iteration splits into three steps. On the compute lane the GPU part
// before the cache (norm, q/k/v projections, attention over the rows on the GPU, then the copy of
// the delegated rows' queries, keys and values to the micro-batch's CPU workspace); on the CPU
// lane the CPU's part (it writes the keys and values into its rows and attends them); and on the
// compute lane again the part after (the attention output back to the device, the output
// projection). The compute lane is software-pipelined so that the GPU has work while the CPU
// attends: micro-batch k's part after runs once micro-batch k + 1's part before is queued
// (pre 0, pre 1, post 0, pre 2, post 1, ..., pre nb-1, post nb-2, post nb-1). So two
// micro-batches are in flight, each in its own workspace (micro-batch % 2). A hidden-state store
// follows the part after; a load into a slot follows every use of the slot before it, so with
// moving activations micro-batch k + 2's hidden states load after micro-batch k's are stored.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "src/core/status.h"

namespace strata {

// kCpu runs CPU attention over host-resident cache rows (CPU delegation) beside the GPU's work.
enum class Lane : uint8_t { kLoad = 0, kCompute = 1, kStore = 2, kCpu = 3 };
inline constexpr int kNumLanes = 4;
const char* LaneName(Lane lane);  // "load", "compute", "store", "cpu"

enum class StepKind : uint8_t {
  kLoadWeights,
  kLoadCache,
  kLoadActivations,
  kCompute,
  kStoreCache,
  kStoreActivations,
  // CPU delegation's three parts of a decode attention layer (see above): the compute lane's
  // part before the CPU, the CPU lane's attention, and the compute lane's part after.
  kComputeToCpu,
  kCpuAttention,
  kComputeFromCpu,
};
const char* StepKindName(StepKind kind);  // "load_weights", ...

// What a scheduling layer computes.
enum class LayerRole : uint8_t { kInputEmbedding, kAttention, kMlp, kOutput };
const char* LayerRoleName(LayerRole role);

// Scheduling layers of a model with `blocks` transformer blocks: 2 * blocks + 2.
constexpr int NumSchedulingLayers(int blocks) { return 2 * blocks + 2; }
// The role of scheduling layer `layer`. REQUIRES: 0 <= layer < NumSchedulingLayers(blocks).
LayerRole RoleOfLayer(int layer, int blocks);
// The transformer block of an attention or MLP scheduling layer: (layer - 1) / 2.
constexpr int BlockOfLayer(int layer) { return (layer - 1) / 2; }

// The buffers steps hand to each other. Slots are the double-buffered working buffers in device
// memory; homes are where a micro-batch's cache and hidden states live between uses.
enum class BufferKind : uint8_t {
  kWeightSlot,      // index: slot (scheduling-layer counter % 2)
  kCacheSlot,       // index: slot (attention-step counter % 2): KV staging / CPU-attention cache
  kActivationSlot,  // index: slot (layer-step counter % 2)
  kCacheHome,       // index: block * num_micro_batches + k
  kActivationHome,  // index: k
  kTokens,          // index 0: the block's sampled tokens, written by the output layer's
                    // computes and read by the input embedding's row gather
  kCpuWorkspace,    // index: micro-batch % 2: CPU delegation's queries, keys, values and
                    // attention output in host memory
};
const char* BufferKindName(BufferKind kind);

struct BufferId {
  BufferKind kind = BufferKind::kWeightSlot;
  int index = 0;
  auto operator<=>(const BufferId&) const = default;
};

struct BufferAccess {
  BufferId buffer;
  bool write = false;  // false: read only; true: written (and possibly read)
};

struct Step {
  int id = 0;  // index in BlockSchedule::steps
  Lane lane = Lane::kCompute;
  StepKind kind = StepKind::kCompute;
  int token = 0;         // token step: 0 is the prefill
  int layer = 0;         // scheduling layer
  int micro_batch = -1;  // k; -1 for weight loads, which serve every micro-batch
  // The working-buffer slots the step uses, -1 where it uses none of that family: a load or store
  // uses the slot of the family it moves, a compute every slot it reads or writes.
  int weight_slot = -1;
  int cache_slot = -1;
  int activation_slot = -1;
  std::vector<BufferAccess> accesses;
  std::vector<int> waits;  // earlier steps on other lanes, at most one per lane
};

// Which transfers a placement needs; a family that lives wholly on the device needs none.
struct ScheduleShape {
  int blocks = 0;             // transformer blocks L (>= 1)
  int num_micro_batches = 1;  // nb (>= 1)
  int num_tokens = 1;         // token steps (>= 1): the prefill and num_tokens - 1 decodes
  // Weights of this role are (partly) off the device and are loaded into a weight slot (the input
  // embedding's: the rows of the block's tokens).
  bool load_input_weights = false;
  bool load_block_weights = false;  // attention and MLP layers
  bool load_output_weights = false;
  // Hidden states live (partly) off the device: every layer but the output stores them, every
  // layer but the input loads them, through activation slots.
  bool move_activations = false;
  // Attention layers of decode steps load (part of) their slice into a cache slot first.
  bool load_cache_decode = false;
  // Attention layers send (part of) the new keys and values home from a cache slot.
  bool store_cache_prefill = false;
  bool store_cache_decode = false;
  // Decode attention layers delegate (part of) their rows to the CPU: each splits into the
  // compute lane's part before, the CPU lane's attention and the compute lane's part after.
  bool cpu_attention_decode = false;

  // InvalidArgument naming the first bad count.
  Status Validate() const;
  bool operator==(const ScheduleShape&) const = default;
};

struct BlockSchedule {
  ScheduleShape shape;
  std::vector<Step> steps;

  int num_layers() const { return NumSchedulingLayers(shape.blocks); }
};

// Builds the schedule. REQUIRES: shape.Validate().ok().
BlockSchedule BuildBlockSchedule(const ScheduleShape& shape);

}  // namespace strata
