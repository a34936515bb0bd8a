// The compute steps of the executor: one scheduling layer for one micro-batch, on weights and a
// KV cache wherever placement put them. Decode attention over rows that live in CPU memory runs
// on the CPU over those rows (CPU delegation) with the micro-batch's own CPU workspace, so the
// next micro-batch's load never touches what this one computes on. A schedule that splits such a
// step (ScheduleShape::cpu_attention_decode) runs the CPU's part on a lane of its own
// (CpuAttention) while the compute lane goes on with other micro-batches.
//
// With the 4-bit cache (plan.compress_cache) the rows hold codes and params wherever they live,
// and the backend's 4-bit ops (Backend::WriteKvQ4, AttendKvQ4) write and attend them: each step
// quantizes the keys and values it writes (the prefill the prompt's rows, a decode step one slot
// per sequence and KV head), decode attention reads the codes directly, and the prefill attends
// to the prompt's own keys and values (placement's kv_prefill), as FlexGen does, so the tokens
// are the frozen reference's with the same cache (tests/reference/). Keys are rotated
// (plan.rotate_keys()) and smoothed (plan.smooth_keys()) as follows: the smoothing of each
// (layer, sequence, KV head) is fitted at the prefill to the prompt's real tokens and stays
// resident where the layers compute (placement's cache.smoothing); keys are smoothed and decode
// queries scaled there before they go anywhere (to the CPU too), so no statistics travel with
// the cache. Exact tokens (plan.exact_tokens()): every key and value written is also stored, in
// the space the 4-bit keys are in, in its row's exact rows when its token is in the sequence's
// sink or window, and decode attention reads those tokens from there. A row's exact rows stay
// where its attention runs: on the device (placement's cache.exact), or with CPU delegation for
// an off-GPU row in the host tier (cache.exact_cpu), copied there once after the prefill wrote
// them on the device. Keys by channel (plan.channel_keys()) are quantized a group at a time when
// its last slot is written, from the step's keys and the exact rows.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "src/memory/memory_tiers.h"
#include "src/memory/placement.h"
#include "src/runtime/executor_attention.h"
#include "src/runtime/executor_sequences.h"
#include "src/runtime/executor_trace.h"
#include "src/runtime/input_rows.h"
#include "src/runtime/transformer.h"
#include "src/schedule/block_schedule.h"

namespace strata {

// One block while it runs. Micro-batch k holds sequences [k * gpu_batch_size, ...); the last one
// may be short. Prompts are left-padded to prompt_len.
struct BlockRun {
  const std::vector<GenerationRequest>* requests = nullptr;
  BlockSequences* sequences = nullptr;
  int gpu_batch_size = 1;
  int num_micro_batches = 1;
  int prompt_len = 1;
  std::vector<StepInput> inputs;  // [k]: the token step computing now (compute lane only)
  // The input embedding's rows the load lane gathered for the token step whose input layer
  // computes next (when its weights are off the GPU): written by that load, which the schedule
  // orders after the previous step's sampling and before the input layer computes.
  InputRows input_rows;

  int batch(int k) const;  // sequences in micro-batch k
};

// When the input layer's weights are off the GPU, its weight slot holds only the rows of the
// step's tokens and positions (BlockRun::input_rows), which the embedding looks up by index.
//
// Thread-compatible: the compute lane calls Run, and the CPU lane CpuAttention beside it.
class BlockCompute {
 public:
  // REQUIRES: all outlive this object; `cpu_backend` is the CPU's (the same kind in builds
  // without CUDA, never the same object as the device's).
  BlockCompute(const Model& model, Backend& device_backend, Backend& cpu_backend,
               const Placement& placement, const MemoryTiers& tiers);

  // Runs compute-lane step `step` of `run` (kCompute, or CPU delegation's kComputeToCpu and
  // kComputeFromCpu), its device work on `stream` (the compute lane's). A kCompute attention step
  // that delegates (a schedule that does not split it) runs the CPU's part itself, between
  // host waits.
  void Run(const Step& step, int blocks, BlockRun& run, Stream& stream, LaneRecord& record);
  // Runs CPU-lane step `step` (kCpuAttention) of `run`: micro-batch step.micro_batch's delegated
  // rows' keys and values into their rows and their attention, from and to its CPU workspace, on
  // the CPU backend's stream; returns once that work has finished. REQUIRES: the part before's
  // copies to the workspace have landed and the part after has not begun. May run on another
  // thread than Run does, at the same time: it touches only the CPU stream, the CPU's row tables
  // and the workspace, and reads run.inputs[step.micro_batch].
  void CpuAttention(const Step& step, const BlockRun& run);
  // True when decode attention over the off-GPU cache rows runs on the CPU.
  bool delegates() const { return delegate_; }

 private:
  // A micro-batch's CPU workspace (placement's cache.cpu_workspace[micro_batch % 2]) for a
  // decode step of `batch` sequences whose rows [local, rows) are delegated. Regions, each sized
  // for a whole micro-batch and viewed here at the step's size: 0 queries, 1 outputs, 2 keys,
  // 3 values; the delegated rows' bytes are [begin, end) of 0 and 1 and [kv_begin, kv_end) of
  // 2 and 3.
  struct WorkspaceView {
    std::span<uint8_t> host[4];
    DeviceSpan cpu[4];  // the same bytes as host_arena_ spans, for the CPU backend's ops
    uint64_t begin = 0, end = 0, kv_begin = 0, kv_end = 0;
  };
  WorkspaceView WorkspaceOf(int micro_batch, int batch, int local, int rows) const;

  void Input(const Step& step, BlockRun& run, Stream& stream, DeviceSpan hidden);
  // The attention layer, or with kComputeToCpu its part before the CPU: projections, the new
  // keys and values into the rows where the layer computes and their attention, then the
  // delegated rows' queries, keys and values (and the local rows' output) to the workspace.
  void Attention(const Step& step, int block, BlockRun& run, Stream& stream, DeviceSpan hidden,
                 LaneRecord& record);
  // kComputeFromCpu: the attention output back from the workspace, the output projection.
  void AttentionFromCpu(const Step& step, BlockRun& run, Stream& stream, DeviceSpan hidden,
                        LaneRecord& record);
  AttentionShape ShapeOf(const StepInput& in) const;
  // Rows [0, LocalRows) of a step's `rows` are attended where the layer computes, the rest on
  // the CPU (CPU delegation, decode steps).
  int LocalRows(const Step& step, int rows) const;
  // Smoothed keys (plan.smooth_keys()): the means and scales of micro-batch step.micro_batch's
  // first `batch` sequences in layer `block` (placement's cache.smoothing).
  std::pair<DeviceSpan, DeviceSpan> SmoothingOf(const Step& step, int block, int batch) const;
  // The 4-bit cache's step shape and format for `in`.
  KvQ4Step Q4StepOf(const StepInput& in) const;
  // CPU delegation, on `stream`: the delegated rows' queries, keys and values to the workspace,
  // and with `with_local` the output of rows [0, local) as well.
  void ToCpu(int micro_batch, int batch, const Transformer::AttentionBuffers& buf, int local,
             int rows, bool with_local, Stream& stream, LaneRecord& record);
  // The CPU's part: it writes the step's keys and values into the delegated rows where they live
  // and attends them, from and to the workspace; returns once done.
  void OnCpu(const Step& step, const BlockRun& run);
  // The delegated rows' output (with `with_local`, every row's) from the workspace into `attn`.
  void FromCpu(int micro_batch, DeviceSpan attn, int batch, int local, int rows, bool with_local,
               Stream& stream, LaneRecord& record);
  // CPU delegation with exact tokens, at the prefill: the exact rows of the slice's off-GPU rows,
  // written on the device, to the host tier (placement's cache.exact_cpu).
  void ExactRowsToHost(const Step& step, int block, int rows, Stream& stream);
  // 4-bit cache: the prefill's attention, on the prompt's keys and values as computed (dense,
  // in the activations' type).
  void PrefillOnDense(const StepInput& in, Stream& stream,
                      const Transformer::AttentionBuffers& buf, AttentionShape shape);
  // The output layer: the logits of each sequence's newest row, a token drawn from each (or a
  // forced one scored) on the device and the ids taken (BlockSequences); at the prefill also the
  // logits of every real prompt row of a sequence that asks for its prompt logits, read back.
  void Output(const Step& step, BlockRun& run, Stream& stream, DeviceSpan hidden);
  // logits[rows, vocab] of `rows` rows of last_hidden, computed on `stream` into placement's
  // logits.
  DeviceSpan Logits(const Step& step, Stream& stream, int rows);
  // Dense rows [row_begin, row_end) of `table` take the step's keys and values, k_new and v_new
  // [batch * tokens, kv_heads * head_dim] in the rows' arena (the device's, or host_arena_ for
  // rows delegated to the CPU), in their slots of `in`'s new tokens: copies on `stream`.
  void WriteRows(Stream& stream, const std::vector<KvRow>& table, int row_begin, int row_end,
                 const StepInput& in, DeviceSpan k_new, DeviceSpan v_new) const;
  // Rows [begin, end) of the `rows` KV rows of slice (block, k) for `step`, in `dense` or `q4`
  // (4-bit, with their exact rows), which are sized to `rows`.
  void BuildRows(const Step& step, int block, int begin, int end, int rows,
                 std::vector<KvRow>& dense, std::vector<KvQ4Row>& q4) const;
  // A host-tier extent as a span of host_arena_ (the CPU backend's view of the host tier).
  DeviceSpan Host(const CpuExtent& e) const;
  // Bytes of one activation element (placement's activation_type).
  uint64_t ActivationBytes() const { return SpanElementBytes(p_.activation_type); }
  // Where tensor `t` is for a step in weight slot `slot` (or at home), as its first `rows` rows
  // (all of them: -1); a 4-bit tensor's is its expansion to the activations' type.
  DeviceWeight View(const PlacedTensor& t, int slot, int64_t rows = -1) const;
  // 4-bit weights: at micro-batch 0 expands the step's scheduling layer (from its weight slot
  // and GPU homes) into placement's expanded_weights, which every micro-batch of the layer then
  // reads; so once per layer per token step, counted in `record`.
  void ExpandWeights(const Step& step, int blocks, const BlockRun& run, Stream& stream,
                     LaneRecord& record);

  const Model& model_;
  Backend& device_;
  Backend& cpu_;
  const Placement& p_;
  const MemoryTiers& tiers_;
  const bool delegate_;
  Transformer transformer_;
  std::unique_ptr<DeviceArena> host_arena_;  // the host tier, for the CPU backend's ops
  std::unique_ptr<Stream> cpu_stream_;       // CPU attention's
  std::unique_ptr<Event> output_ready_, to_cpu_, cpu_done_;
  // [micro-batch]: where its part before left the attention output for its part after.
  std::vector<DeviceSpan> pending_;
  std::vector<DeviceLayerWeights> block_views_[2];  // [slot][block]
  DeviceModelWeights model_views_[2];               // input and output tensors, [slot]
  std::vector<float> prompt_logits_;       // read back from the device
  std::vector<SamplingSpec> specs_;        // the output layer's draws
  std::vector<int32_t> forced_, sampled_;  //   and the ids
  std::vector<double> logprobs_;
  std::vector<KvRow> rows_;  // the compute lane's row tables
  std::vector<KvQ4Row> q4_rows_;
  std::vector<KvRow> cpu_rows_;  // the CPU's (CpuAttention, OnCpu)
  std::vector<KvQ4Row> cpu_q4_rows_;
  int expanded_token_ = -1, expanded_layer_ = -1;  // what expanded_weights holds
};

}  // namespace strata
