// Backend: the ops a transformer layer is built from, over fp32 activation buffers that live in
// the backend's memory (host memory for the CPU backend, device memory for CUDA). Weights are
// TensorViews of F32, F16 or BF16 data; the backend converts them as it reads. The runtime never
// names a concrete backend: the commands make one (src/backend/cpu/cpu_backend.h, or the CUDA
// twin) and hand it down.
// Thread-compatible: one caller at a time per Backend object.
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
  // Pins `memory` for this backend's copies until the result is destroyed (which must happen
  // before the memory is freed); a backend whose copies need no pinning pins nothing.
  // ResourceExhausted, saying how much and what to do, when it cannot be pinned.
  virtual Result<std::unique_ptr<PinnedHost>> PinHostMemory(std::span<uint8_t> memory) = 0;

  // y[m, out] = x[m, in] * w[out, in]^T + bias[out] (bias optional: !bias.present()).
  virtual void Linear(const float* x, int m, const TensorView& w, const TensorView& bias,
                      float* y) = 0;
  // out[n, hidden] = table[ids[i]] rows. REQUIRES: every id in [0, table.dim(0)).
  virtual void Embed(const TensorView& table, const int32_t* ids, int n, float* out) = 0;
  // Adds `pos_table` rows (learned absolute positions, OPT) to x[n, hidden].
  virtual void AddPositionEmbedding(const TensorView& pos_table, const int32_t* positions, int n,
                                    float* x) = 0;
  // Per-row LayerNorm (bias optional) and RMSNorm over `dim`; y may equal x.
  virtual void LayerNorm(const float* x, const TensorView& w, const TensorView& b, float eps,
                         int rows, int dim, float* y) = 0;
  virtual void RmsNorm(const float* x, const TensorView& w, float eps, int rows, int dim,
                       float* y) = 0;
  virtual void Activate(ActivationKind kind, float* x, int64_t n) = 0;
  virtual void SiluMul(float* gate, const float* up, int64_t n) = 0;
  // x[tokens, heads, head_dim] rotated in place; inv_freq from RopeInverseFrequencies (shapes.h).
  virtual void Rope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
                    const float* inv_freq) = 0;
  // Layouts and masking: AttentionShape (shapes.h).
  virtual void Attention(const AttentionShape& shape, const float* q, const float* k,
                         const float* v, const int* start, float* out) = 0;
  // x[i] += y[i].
  virtual void Add(float* x, const float* y, int64_t n) = 0;
};

}  // namespace strata
