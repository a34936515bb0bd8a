// The cost model: how long a block takes under a plan on a machine, modelled on what strata's
// executor does (FlexGen's formulation, ../shared/docs/ANCHORS.md, adjusted to strata).
//
// Time is counted per *layer step* — one layer for all micro-batches of a block — on four lanes
// that the zig-zag executor runs side by side:
//   disk     disk -> pinned CPU reads plus CPU -> disk writes (one I/O thread, one device)
//   h2d      CPU -> GPU copies (weights, the off-GPU KV cache, activations, CPU attention output)
//   d2h      GPU -> CPU copies (new KV for the off-GPU cache, activations, queries for the CPU)
//   compute  GPU GEMMs, GPU attention, CPU attention and 4-bit expansion, one after another
//            (the compute lane waits for the CPU's attention of its micro-batch)
// With overlap a step takes its slowest lane, or longer where the two weight slots chain its lanes
// (below); without overlap, the sum of the lanes. GEMMs run micro-batch
// after micro-batch, each at the profile's rate for its rows (HardwareSpec::GemmTflopsAt: a
// micro-batch's new tokens in a transformer layer, one row per sequence in the output layer) and
// bounded below by the weight bytes it reads from device memory at gpu_memory_gbps (a roofline);
// a layer that fits in gpu_cache_bytes is read from memory once per layer step. Disk traffic is
// staged through pinned memory, so a disk-resident byte costs a disk read and an h2d copy.
// The CPU build's emulated device copies with memcpy over the memory bus its GEMMs stream
// weights over: beside a transformer layer too big for gpu_cache_bytes, copies of CPU-resident
// bytes run at the profile's copy_beside_gemm_gbps where it has one.
// 4-bit weights are expanded once per layer per block (not once per micro-batch, as FlexGen
// does); the 4-bit cache is read directly by the attention kernels at their own rates.
// Decode steps are averaged over the generation (context prompt_len + gen_len / 2). A decode
// step's new KV for a disk-resident cache is written as the executor writes it, one 4 KiB page
// per (sequence, KV head, plane), at disk_page_write_gbps when the profile has it.
// The input embedding's compute (a gather of a few rows) is not modelled. Its load brings only
// the rows of the block's tokens and positions (src/runtime/input_rows.h): at the prefill at most
// every prompt token's, in a decode step one per sequence (fewer where tokens repeat; the model
// counts them all, up to the tables' rows). Each gathered row is read from disk as at least a
// 4 KiB page; the GPU-resident rows' device copies are not modelled.
// Each disk write the store lane awaits (a micro-batch's activations, a micro-batch's new KV) also
// waits behind the reads already on the disk: disk_write_wait_bytes from the profile, but at most
// half the disk reads of its part of the layer (attention or MLP) — the reads left, on average,
// when the write arrives — at disk_read_gbps. That wait is store-lane latency, not disk time: it
// is reported as disk_write_wait_s and does not bound the step (the reads it waits behind do).
// A weight tensor split between the GPU and another tier is assembled in its layer's weight slot,
// its GPU rows copied there too (GPU -> GPU, on the load lane's copy engine beside the h2d
// copies): d2d_s, at d2d_gbps (the profile's, or half the device memory bandwidth).
// The executor's two weight slots hold a layer's attention and MLP parts in turn, and the load
// lane brings the next part's weights after the inputs of a part's second micro-batch and before
// those of its later ones (src/schedule/block_schedule.h). So a part's weights cannot load before
// the part two back has computed all its micro-batches, the part cannot compute before its
// weights have loaded, and a part's third and later micro-batches wait for the next part's
// weights. Over a layer step that gives chains of waits, each a lower bound on the overlapped
// step, on the disk reads and on the h2d copies alike:
//   a part's weights and first micro-batch's inputs, the other part's micro-batches after the
//   second, and all of the part's compute (one slot's cycle);
//   both parts' weights and first inputs, and their micro-batches after the second (the load
//   lane waiting for the compute lane).
// The output layer's weights take the slot of the next token step's first attention layer (the
// scheduling layers are even in number), so the output layer's weights load, then it computes,
// and only then do that attention's weights load: the output step is at least its weights' trip
// plus its compute, on each link.
// Where compute is short beside the loads (a GPU) they stay below the slowest lane; where the
// two are alike (the CPU build's emulated device, CPU attention) they bind: slot_chain_s, "weight
// slots". With every weight on the GPU there are no slots and no chains, so the chains are not
// affine in the fractions: the search solves each side with its own LP (policy/lp_placement.h).
// A part's compute is its share of the GEMMs and 4-bit expansion by matrix elements, attention
// and the new KV's quantization going to the attention part; the expansion is done by the first
// micro-batch's step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/hardware_spec.h"
#include "policy/linear_form.h"
#include "policy/model_spec.h"
#include "policy/plan.h"
#include "policy/weight_layout.h"
#include "policy/workload.h"

namespace strata {

// Seconds of one layer step on each link and compute unit.
struct LayerTimes {
  double disk_read_s = 0;
  double h2d_s = 0;
  double d2h_s = 0;
  double disk_write_s = 0;
  double gpu_gemm_s = 0;
  double gpu_attention_s = 0;
  double cpu_attention_s = 0;
  double gpu_dequant_s = 0;  // expanding 4-bit weights, quantizing new KV
  double disk_write_wait_s = 0;  // the store lane's disk writes waiting behind reads (latency)
  double d2d_s = 0;              // GPU rows of split weight tensors copied into the weight slot
  double slot_chain_s = 0;       // the longest chain through the weight slots (overlap only)

  double disk_lane_s() const { return disk_read_s + disk_write_s; }
  // The load lane's copy engine: h2d copies and the GPU -> GPU copies of split tensors.
  double h2d_lane_s() const { return h2d_s + d2d_s; }
  double compute_lane_s() const {
    return gpu_gemm_s + gpu_attention_s + cpu_attention_s + gpu_dequant_s;
  }
  // The step: the slowest lane or weight-slot chain with overlap, the sum of the lanes without.
  double step_s(bool overlap) const;
  // The slowest lane, e.g. "h2d" or "compute (CPU attention)" naming its largest unit, or
  // "weight slots" where a chain through them is longer.
  std::string Bottleneck() const;
};

// The store lane's wait behind reads. It is not affine in the fractions (a part waits only if it
// writes to disk at all), so the LP leaves it out, and it does not bound the step (step_s), so no
// prediction of throughput counts it: it is the store lane's predicted busy time only.
struct WriteWaitForm {
  // A part of the layer as the executor schedules it (attention and MLP of a transformer layer):
  // its disk read seconds, and which of its micro-batches' stores go to disk when their family
  // has a disk share.
  struct Part {
    LinearForm disk_read_s;
    bool stores_activations = false;
    bool stores_cache = false;
  };
  std::vector<Part> parts;
  double micro_batches = 0;
  double wait_s = 0;  // the profile's disk_write_wait_bytes at disk_read_gbps; 0: no wait
  double Eval(const Fractions& x) const;
};

// The GPU -> GPU copies of a layer's split tensors. Which tensor straddles the GPU's share of
// the layer's rows (policy/weight_layout.h) jumps with the fractions, so this is not affine
// either: the LP leaves it out, and evaluations at given fractions count it.
struct SplitCopyForm {
  std::vector<LayerRows> layers;  // the layers placed together (the output's tied embedding is
                                  // the input layer's)
  double seconds_per_byte = 0;
  // Seconds copying the GPU rows of tensors with rows both on and off the GPU, placed at the
  // fractions' weight percents (rounded as --percent takes them).
  double Eval(const Fractions& x) const;
};

// The same quantities as affine functions of the placement fractions (for the search's LP).
struct LayerForms {
  LinearForm disk_read_s, h2d_s, d2h_s, disk_write_s;
  LinearForm gpu_gemm_s, gpu_attention_s, cpu_attention_s, gpu_dequant_s;
  WriteWaitForm disk_write_wait_s;
  SplitCopyForm d2d_s;
  std::vector<LinearForm> slot_chains;  // the weight slots' chains, where some weights load;
                                        // empty but for the transformer and output layers
                                        // with overlap
  LayerTimes Eval(const Fractions& x) const;
};

struct CostForms {
  LayerForms layer_prefill;  // one transformer layer
  LayerForms layer_decode;
  LayerForms output_prefill;  // the output layer (final norm and projection, last position)
  LayerForms output_decode;
  LayerForms input_prefill;  // the input embedding: the prompts' rows
  LayerForms input_decode;   // one row per sequence
};

// Forms for the plan's gpu_batch_size, num_gpu_batches and flags (its percents are ignored).
CostForms BuildCostForms(const ModelSpec& model, const Workload& workload, const Plan& plan,
                         const HardwareSpec& hardware);

struct PhaseCost {
  LayerTimes input;         // the input embedding step
  LayerTimes layer;         // one transformer layer step
  LayerTimes output;        // the output layer step
  double token_step_s = 0;  // the input step, num_layers layer steps and the output step
  double total_s = 0;       // per block: one token step for prefill, gen_len - 1 for decode
};

struct CostEstimate {
  PhaseCost prefill;
  PhaseCost decode;
  double block_s = 0;
  int64_t num_blocks = 0;  // ceil(num_prompts / block size), the last one padded; 1 for an
                           // open-ended job (num_prompts 0)
  double total_s = 0;
  double throughput_tokens_per_s = 0;  // prompts * gen_len / total_s, FlexGen's measure (prompts:
                                       // num_prompts, or the block size for an open-ended job)
  double prefill_tokens_per_s = 0;     // block size * prompt_len / prefill.total_s
  double decode_tokens_per_s = 0;      // block size * (gen_len - 1) / decode.total_s (0 if none)
};

// The prediction for one plan. REQUIRES: model, workload, plan and hardware validate. Computed
// whether or not the plan fits in memory (policy/fit_check.h says that).
CostEstimate EstimateCost(const ModelSpec& model, const Workload& workload, const Plan& plan,
                          const HardwareSpec& hardware);

// Combines evaluated forms into an estimate (EstimateCost is this at the plan's fractions).
CostEstimate CombineCost(const CostForms& forms, const Fractions& x, const ModelSpec& model,
                         const Workload& workload, const Plan& plan);

}  // namespace strata
