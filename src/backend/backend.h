// Backend: the ops a transformer layer is built from. Each op is given to a Stream of the backend
// (memory.h) and runs there in order, asynchronously to the host, on buffers in the backend's
// device arena: weights are DeviceWeights of F32, F16 or BF16 elements that the backend converts
// as it reads; activations (hidden states, q, k, v, attention outputs, MLP intermediates, the
// dense KV cache) are DeviceSpans whose type says their element: kF32, kF16 or kBF16 (sizes and
// types are checked). Every op takes activations of any of the three, all of one type within an
// op, except where an op says otherwise; it computes in fp32 (accumulation in GEMMs and
// attention, statistics in norms and softmax) and rounds only what it stores. The runtime keeps
// its activations in ActivationType(): fp32 on the CPU, fp16 or bf16 on a GPU, as FlexGen and
// every GPU engine do. Logits, the 4-bit cache's exact rows and its key smoothing are fp32.
// Small host arrays (token ids, positions, RoPE frequencies) are read before the op returns.
// The runtime never names a concrete backend: the commands make one
// (src/backend/cpu/cpu_backend.h, or the CUDA twin) and hand it down.
// Thread-compatible: one caller at a time per Backend object, and its ops on one stream at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "src/backend/memory.h"
#include "src/backend/shapes.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

namespace strata {

enum class ActivationKind { kRelu, kGelu };

// A weight in the device arena: `data` holds rows x cols elements of its span type (kF32, kF16 or
// kBF16), row-major; a vector is `rows` elements with cols 1. Absent (an optional bias): empty.
struct DeviceWeight {
  DeviceSpan data;
  int64_t rows = 0;
  int64_t cols = 1;

  bool present() const { return !data.empty(); }
  int64_t numel() const { return rows * cols; }
};

// One row of a 4-bit KV cache (a sequence's KV head) wherever it lives: its four planes of
// kernels/kv_q4_format.h from slot 0 (keys by channel: KvQ4ChannelParamHalves params per slot,
// q4_sizes.h), each at least `stride` slots (a span may run on past the row); and, when the
// format keeps exact tokens, its exact rows: sink + window fp32 head vectors of keys (in the
// space the 4-bit keys are in: smoothed and rotated like them) and of values, token i of the
// sequence (slot start + i) at row i when i < sink, else at row sink + i % window. A backend may
// need the spans aligned (the CUDA backend: 16 bytes, params by their slot size; checked).
struct KvQ4Row {
  DeviceSpan k_codes, k_params, v_codes, v_params;
  DeviceSpan k_exact, v_exact;
  int stride = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // The element type (kF32, kF16 or kBF16) in which the runtime keeps activations for a model
  // whose weights are `weights` (src/memory/model_spec_of.h, WeightDTypeOf). Default: kF32.
  virtual SpanType ActivationType(DType weights) const {
    (void)weights;
    return SpanType::kF32;
  }

  // Memory and order (memory.h). The device tier's arena of `bytes`, allocated once per run:
  // ResourceExhausted, saying how much and what to do, when it cannot be had.
  virtual Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) = 0;
  // A stream, and an event, of this backend.
  virtual std::unique_ptr<Stream> MakeStream() = 0;
  virtual std::unique_ptr<Event> MakeEvent() = 0;
  // An arena over `memory`, host memory the caller owns and keeps while the arena lives, for a
  // backend whose ops run on host memory (the CPU backend, whose ops then take spans of the host
  // tier); null for a backend whose ops cannot read host memory.
  virtual std::unique_ptr<DeviceArena> HostArena(std::span<uint8_t> memory) = 0;
  // Pins `memory` for this backend's copies until the result is destroyed (which must happen
  // before the memory is freed); a backend whose copies need no pinning pins nothing.
  // ResourceExhausted, saying how much and what to do, when it cannot be pinned.
  virtual Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t> memory) = 0;
  // Ok when this backend's 4-bit cache ops (WriteKvQ4, AttendKvQ4) run `format` at `head_dim`;
  // else Unsupported, naming what it does not run and what to do instead, so that a plan is
  // refused when it is placed rather than when a step runs. Default: every format.
  virtual Status SupportsKvQ4(const KvQ4Format& format, int head_dim) const {
    (void)format;
    (void)head_dim;
    return Status::Ok();
  }
  // The backend's own device scratch (its ops' temporary buffers, a GEMM library's workspace):
  // bytes of device memory, outside the device arena, that ReserveScratch takes for a run whose
  // ops stay within `limits` (shapes.h). The device tier's capacity holds them as well as the
  // arena. Default: 0 (a backend whose ops need none, as the CPU backend's).
  virtual uint64_t ScratchBytes(const OpLimits& limits) const {
    (void)limits;
    return 0;
  }
  // Allocates ScratchBytes(limits) once, before the token loop (a later call replaces the
  // reservation), so that no op allocates device memory; an op that needs more than `limits`
  // allow then aborts naming the buffer (a bug: the limits were wrong). ResourceExhausted,
  // saying how much and what to do, when the device cannot give it. Default: nothing to do.
  virtual Status ReserveScratch(const OpLimits& limits) {
    (void)limits;
    return Status::Ok();
  }

  // y[m, out] = x[m, in] * w[out, in]^T + bias[out] (bias optional: !bias.present()). y may be
  // kF32 when x is not (the logits).
  virtual void Linear(Stream& stream, DeviceSpan x, int m, const DeviceWeight& w,
                      const DeviceWeight& bias, DeviceSpan y) = 0;
  // The same followed by ReLU on y, as one op so that a device can apply it while the GEMM writes
  // y (ReLU commutes with rounding: the values are those of Linear then Activate). Default:
  // exactly that pair.
  virtual void LinearRelu(Stream& stream, DeviceSpan x, int m, const DeviceWeight& w,
                          const DeviceWeight& bias, DeviceSpan y) {
    Linear(stream, x, m, w, bias, y);
    Activate(stream, ActivationKind::kRelu, y);
  }
  // out[i] = table row ids[i], for each of the ids. REQUIRES (checked): every id in
  // [0, table.rows).
  virtual void Embed(Stream& stream, const DeviceWeight& table, std::span<const int32_t> ids,
                     DeviceSpan out) = 0;
  // x[i] += table row positions[i] (learned absolute positions, OPT). REQUIRES (checked): every
  // position in [0, table.rows).
  virtual void AddPositionEmbedding(Stream& stream, const DeviceWeight& table,
                                    std::span<const int32_t> positions, DeviceSpan x) = 0;
  // Per-row LayerNorm (bias optional) and RMSNorm of x[rows, dim]; y may be x.
  virtual void LayerNorm(Stream& stream, DeviceSpan x, const DeviceWeight& w,
                         const DeviceWeight& b, float eps, int rows, int dim, DeviceSpan y) = 0;
  virtual void RmsNorm(Stream& stream, DeviceSpan x, const DeviceWeight& w, float eps, int rows,
                       int dim, DeviceSpan y) = 0;
  // Every element of x, in place.
  virtual void Activate(Stream& stream, ActivationKind kind, DeviceSpan x) = 0;
  // gate[i] = silu(gate[i]) * up[i].
  virtual void SiluMul(Stream& stream, DeviceSpan gate, DeviceSpan up) = 0;
  // x[positions.size(), heads, head_dim] rotated in place; inv_freq (head_dim / 2 values) from
  // RopeInverseFrequencies (shapes.h).
  virtual void Rope(Stream& stream, DeviceSpan x, std::span<const int32_t> positions, int heads,
                    int head_dim, std::span<const float> inv_freq) = 0;
  // x[i] += y[i].
  virtual void Add(Stream& stream, DeviceSpan x, DeviceSpan y) = 0;
  // out[rows, cols] (kF32, kF16 or kBF16) = the 4-bit matrix whose codes and fp16 params
  // (q4_sizes.h's sizes, groups of `group` columns) are `codes` and `params`, expanded.
  virtual void ExpandWeightQ4(Stream& stream, DeviceSpan codes, DeviceSpan params, int64_t rows,
                              int64_t cols, int group, DeviceSpan out) = 0;
  // Causal attention of q over a contiguous cache: layouts and masking in AttentionShape
  // (shapes.h); start holds shape.batch first real slots.
  virtual void Attention(Stream& stream, const AttentionShape& shape, DeviceSpan q, DeviceSpan k,
                         DeviceSpan v, std::span<const int> start, DeviceSpan out) = 0;

  // The 4-bit KV cache (KvQ4Step, KvQ4Row). `rows` are rows [row_begin, row_begin + rows.size())
  // of the micro-batch, each in an arena of this backend (its device arena, or its HostArena);
  // `start` holds the micro-batch's step.batch first real slots. Read before the op returns.
  //
  // Stores the step's keys and values in the rows' new slots, quantized (keys as step.format
  // says: by channel, a group once its last slot is written, from these keys and the exact rows
  // as they were before them), and the exact tokens among them in the rows' exact rows.
  virtual void WriteKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan v_new,
                         std::span<const int> start, std::span<const KvQ4Row> rows,
                         int row_begin) = 0;
  // Decode attention (step.tokens == 1) of q over the rows, on their 4-bit codes directly and
  // their exact tokens from the exact rows, into the query heads of `out` those rows serve (the
  // other heads are left as they are). Each (sequence, KV head) is computed as over one
  // contiguous cache of its own, so the rows may lie anywhere.
  virtual void AttendKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan q,
                          std::span<const int> start, std::span<const KvQ4Row> rows,
                          int row_begin, DeviceSpan out) = 0;
  // Smoothed keys (kernels/cpu/kv_q4_smooth.h): per (sequence, KV head) fp32 channel means and
  // scales, mean and scale [step.batch, num_kv_heads, head_dim]. FitKeySmoothing fits them to
  // each sequence's real keys of k_new (its tokens from slot start[b] on; fewer than two give
  // the identity); SmoothKeys stores k_new's keys as (k - mean) / scale, and ScaleQueries a
  // decode step's queries q [batch, num_heads, head_dim] as q * scale (its KV head's), both in
  // place.
  virtual void FitKeySmoothing(Stream& stream, const KvQ4Step& step, DeviceSpan k_new,
                               std::span<const int> start, DeviceSpan mean,
                               DeviceSpan scale) = 0;
  virtual void SmoothKeys(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan mean,
                          DeviceSpan scale) = 0;
  virtual void ScaleQueries(Stream& stream, const KvQ4Step& step, DeviceSpan q,
                            DeviceSpan scale) = 0;

  // Sampling and scoring, over logits [rows, vocab] (kF32, rows = specs.size() or
  // tokens.size()). The results are written to host memory when the stream reaches the op: the
  // caller keeps `out` and reads it only after an event recorded after the op has completed.
  // `specs` and `tokens` are read before the op returns.
  //
  // out[i] = a token id drawn from the first `limit` logits of row i as specs[i] says
  // (SamplingSpec). REQUIRES: 1 <= limit <= vocab.
  virtual void SampleTokens(Stream& stream, DeviceSpan logits, int vocab, int limit,
                            std::span<const SamplingSpec> specs, std::span<int32_t> out) = 0;
  // out[i] = log p(tokens[i]) under row i: its log-softmax over all `vocab` logits at tokens[i],
  // the exponentials summed in fp64 from the largest logit. REQUIRES: 0 <= tokens[i] < vocab.
  virtual void ScoreTokens(Stream& stream, DeviceSpan logits, int vocab,
                           std::span<const int32_t> tokens, std::span<double> out) = 0;
};

}  // namespace strata
