// Frozen reference for tests: one decoder-only model run layer by layer on the host, the math
// the engine (OffloadGenerator, BlockExecutor) on the CPU backend must reproduce bit for bit
// whatever its plan (tests/runtime/policy_matrix_test.cc). A copy of the Generator forms of the
// engine's former Transformer (once src/runtime/transformer.h), each Backend op replaced by the
// kernels/cpu calls the CPU backend (src/backend/cpu/cpu_backend.cc) makes for it: the same
// kernels in the same order, the same panels and the same OpenMP threading, so the same bits.
// It calls kernels/cpu directly on purpose, never a Backend op, so that a bug in an op cannot
// cancel out between the engine and its reference; it does not change with the engine.
// Not thread-safe: it owns reusable workspaces.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"
#include "src/model/model.h"
#include "src/runtime/step_input.h"
#include "tests/reference/kv_cache.h"

namespace strata::reference {

class Transformer {
 public:
  // REQUIRES: `model` outlives the Transformer. `weights`, when given (e.g. the model's weights
  // after a 4-bit round trip, Q4Weights::RoundTripped()), is used instead of model.weights() and
  // must outlive the Transformer too.
  explicit Transformer(const Model& model, const ModelWeights* weights = nullptr);

  const ModelConfig& config() const { return config_; }

  // hidden[rows, hidden_size] = token (+ position) embeddings of `in`.
  void Embed(const StepInput& in, float* hidden);
  // Attention sub-block of `layer` with its residual: writes the new keys/values into `cache`.
  // With a compressed cache, a decode step (one new token) attends straight to the 4-bit cache;
  // a step of several tokens (prefill) attends to the fp32 keys and values it just computed (and
  // to earlier slots expanded from the cache), as FlexGen does, and stores them compressed.
  void AttentionLayer(int layer, const StepInput& in, KvCache& cache, float* hidden);
  // MLP sub-block of `layer` with its residual.
  void MlpLayer(int layer, int rows, float* hidden);
  // logits[rows, vocab] for the given hidden rows (final norm, then the LM head).
  void Logits(const float* hidden, int rows, float* logits);

 private:
  float* Workspace(std::vector<float>& buf, size_t n);
  // attn = attention of a multi-token step over a compressed cache, on fp32 keys and values.
  void PrefillOnCompressedCache(int layer, const StepInput& in, const KvCache& cache,
                                kernels::cpu::AttentionShape shape, const float* q,
                                const float* keys, const float* values, float* attn);

  // The CPU backend's ops, as it computes them.
  // y[m, out] = x[m, in] * w^T (+ bias): F32 weights straight into the GEMM, F16/BF16 ones
  // converted kPanelRows rows at a time, kQ4 ones expanded whole.
  void Linear(const float* x, int m, const TensorView& w, const TensorView& bias, float* y);
  // out[n, hidden] = table rows ids[0..n), converted (kQ4: expanded) to fp32.
  void EmbedRows(const TensorView& table, const int32_t* ids, int n, float* out);
  // y = LayerNorm (with bias b when present) or RmsNorm of x[rows, dim], as the config says.
  void Norm(const float* x, const TensorView& w, const TensorView& b, int rows, int dim, float* y);
  // x += y over n elements.
  void Add(float* x, const float* y, int64_t n);
  // A 1-D tensor as floats: F32 data is used in place; others are converted into one of two
  // small slots (so a weight and a bias can be live at once).
  const float* Floats(const TensorView& t, int slot);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  std::vector<float> inv_freq_;
  std::vector<float> normed_, q_, k_, v_, attn_, proj_, up_, gate_, k_f32_, v_f32_;
  std::vector<float> panel_, expanded_, row_, vectors_[2];  // the backend ops' scratch
};

}  // namespace strata::reference
