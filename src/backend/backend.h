// Backend: the ops a transformer layer is built from. Each op is given to a Stream of the backend
// (memory.h) and runs there in order, asynchronously to the host, on buffers in the backend's
// device arena: activations are DeviceSpans of fp32 elements (kF32; their sizes are checked),
// weights DeviceWeights of F32, F16 or BF16 elements that the backend converts as it reads.
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

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

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

  // y[m, out] = x[m, in] * w[out, in]^T + bias[out] (bias optional: !bias.present()).
  virtual void Linear(Stream& stream, DeviceSpan x, int m, const DeviceWeight& w,
                      const DeviceWeight& bias, DeviceSpan y) = 0;
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
  // out[rows, cols] (fp32) = the 4-bit matrix whose codes and fp16 params (q4_sizes.h's sizes,
  // groups of `group` columns) are `codes` and `params`, expanded.
  virtual void ExpandWeightQ4(Stream& stream, DeviceSpan codes, DeviceSpan params, int64_t rows,
                              int64_t cols, int group, DeviceSpan out) = 0;
  // Causal attention of q over a contiguous cache: layouts and masking in AttentionShape
  // (shapes.h); start holds shape.batch first real slots.
  virtual void Attention(Stream& stream, const AttentionShape& shape, DeviceSpan q, DeviceSpan k,
                         DeviceSpan v, std::span<const int> start, DeviceSpan out) = 0;
};

}  // namespace strata
