// Backend: the ops a transformer layer is built from, over fp32 activation buffers that live in
// the backend's memory (host memory for the CPU backend, device memory for CUDA). Weights are
// TensorViews of F32, F16 or BF16 data; the backend converts them as it reads. The runtime never
// names a concrete backend: it receives one from MakeCpuBackend() (or the CUDA twin).
// Thread-compatible: one caller at a time per Backend object.
#pragma once

#include <cstdint>
#include <memory>

#include "src/core/tensor.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/rope.h"

namespace strata {

using kernels::cpu::AttentionShape;
using kernels::cpu::RopeParams;

enum class ActivationKind { kRelu, kGelu };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

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
  // x[tokens, heads, head_dim] rotated in place; inv_freq from kernels::cpu::RopeInverseFrequencies.
  virtual void Rope(float* x, const int32_t* positions, int tokens, int heads, int head_dim,
                    const float* inv_freq) = 0;
  // See kernels::cpu::CausalAttention for the layouts.
  virtual void Attention(const AttentionShape& shape, const float* q, const float* k,
                         const float* v, const int* start, float* out) = 0;
  // x[i] += y[i].
  virtual void Add(float* x, const float* y, int64_t n) = 0;
};

std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace strata
