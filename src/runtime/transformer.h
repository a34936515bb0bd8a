// Transformer: one decoder-only model as FlexGen's scheduling layers — input embedding, then per
// block an attention layer and an MLP layer, then the output layer — each callable on its own
// for one micro-batch over weights the caller gives, so an executor can place weights and the KV
// cache itself and interleave layers and micro-batches as it likes (src/runtime/executor.h).
// Not thread-safe: it owns reusable workspaces.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/backend/backend.h"
#include "src/model/model.h"
#include "src/runtime/step_input.h"

namespace strata {

class Transformer {
 public:
  // REQUIRES: `model` and `backend` outlive the Transformer.
  Transformer(const Model& model, Backend& backend);

  const ModelConfig& config() const { return config_; }

  // The position-table rows of `in`'s tokens: positions + config().position_offset; empty for a
  // model without learned positions.
  std::vector<int32_t> PositionRows(const StepInput& in) const;
  // The input embedding by table rows: hidden[i] = token_embedding[token_rows[i]] (+
  // position_embedding[position_rows[i]] where present). The rows are the tokens and
  // PositionRows(); an executor that brings only some rows of the tables passes their indices
  // there (src/runtime/input_rows.h).
  void EmbedRows(std::span<const int32_t> token_rows, std::span<const int32_t> position_rows,
                 const TensorView& token_embedding, const TensorView& position_embedding,
                 float* hidden);
  // The attention sub-block up to the cache: norm, q/k/v projections and RoPE of the step's rows.
  // The buffers are workspaces of this Transformer, valid until its next call: q and attn are
  // [rows, heads * head_dim], k and v [rows, kv_heads * head_dim]; attn is for the caller's
  // attention output.
  struct AttentionBuffers {
    float* q;
    float* k;
    float* v;
    float* attn;
  };
  AttentionBuffers AttentionInputs(const LayerWeights& w, const StepInput& in,
                                   const float* hidden);
  // The attention sub-block after the cache: hidden += attn * wo^T (+ bo).
  void AttentionOutput(const LayerWeights& w, int rows, const float* attn, float* hidden);
  // The MLP sub-block with its residual.
  void MlpLayer(const LayerWeights& w, int rows, float* hidden);
  // logits[rows, vocab] for the given hidden rows (final norm, then the LM head).
  void Logits(const TensorView& final_norm, const TensorView& final_norm_bias,
              const TensorView& lm_head, const float* hidden, int rows, float* logits);
  // Bytes of workspace held now; workspaces only grow, so this is their peak.
  uint64_t workspace_bytes() const;

 private:
  float* Workspace(std::vector<float>& buf, size_t n);

  const ModelConfig& config_;
  const bool learned_positions_;
  Backend& backend_;
  std::vector<float> inv_freq_;
  std::vector<float> normed_, q_, k_, v_, attn_, proj_, up_, gate_;
};

}  // namespace strata
