// Transformer: one decoder-only model as FlexGen's scheduling layers — input embedding, then per
// block an attention layer and an MLP layer, then the output layer — each callable on its own
// for one micro-batch over weights the caller gives, so an executor can place weights and the KV
// cache itself and interleave layers and micro-batches as it likes (src/runtime/executor.h).
// Every op goes to the stream the caller gives, over device memory: weights where placement put
// them, hidden states and the Transformer's own buffers (a workspace placement reserves), all
// of the backend's activation type (Backend::ActivationType, Placement::activation_type).
// Not thread-safe: its buffers are reused by every call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/backend/backend.h"
#include "src/model/model.h"
#include "src/runtime/step_input.h"

namespace strata {

// Where placement put one layer's weights, and the input and output layers' tensors.
using DeviceLayerWeights = LayerTensors<DeviceWeight>;
struct DeviceModelWeights {
  DeviceWeight token_embedding, position_embedding, final_norm, final_norm_bias, lm_head;
};

// The first `rows` rows of `buffer`, a buffer of `width` elements of `type` per row, as a span of
// that type.
DeviceSpan RowsOf(const DeviceSpan& buffer, int64_t rows, int64_t width, SpanType type);

class Transformer {
 public:
  // REQUIRES: `model` and `backend` outlive the Transformer; `workspace` is
  // TransformerWorkspaceBytes(model.config(), max_rows, activations) bytes of the backend's arena
  // (src/memory/placement.h), used by nothing else; no step has more than max_rows token rows.
  Transformer(const Model& model, Backend& backend, DeviceSpan workspace, int64_t max_rows,
              SpanType activations);

  const ModelConfig& config() const { return config_; }
  SpanType activations() const { return activations_; }

  // The position-table rows of `in`'s tokens: positions + config().position_offset; empty for a
  // model without learned positions.
  std::vector<int32_t> PositionRows(const StepInput& in) const;
  // The input embedding by table rows: hidden[i] = token_embedding[token_rows[i]] (+
  // position_embedding[position_rows[i]] where present). The rows are the tokens and
  // PositionRows(); an executor that brings only some rows of the tables passes their indices
  // there (src/runtime/input_rows.h).
  void EmbedRows(Stream& stream, std::span<const int32_t> token_rows,
                 std::span<const int32_t> position_rows, const DeviceWeight& token_embedding,
                 const DeviceWeight& position_embedding, DeviceSpan hidden);
  // The attention sub-block up to the cache: norm, q/k/v projections and RoPE of the step's rows.
  // The buffers are this Transformer's, valid until its next call: q and attn are
  // [rows, heads * head_dim], k and v [rows, kv_heads * head_dim]; attn is for the caller's
  // attention output.
  struct AttentionBuffers {
    DeviceSpan q, k, v, attn;
  };
  AttentionBuffers AttentionInputs(Stream& stream, const DeviceLayerWeights& w,
                                   const StepInput& in, DeviceSpan hidden);
  // The attention sub-block after the cache: hidden += attn * wo^T (+ bo).
  void AttentionOutput(Stream& stream, const DeviceLayerWeights& w, int rows, DeviceSpan attn,
                       DeviceSpan hidden);
  // The MLP sub-block with its residual.
  void MlpLayer(Stream& stream, const DeviceLayerWeights& w, int rows, DeviceSpan hidden);
  // logits[rows, vocab] (kF32) for the given hidden rows (final norm, then the LM head).
  void Logits(Stream& stream, const DeviceModelWeights& w, DeviceSpan hidden, int rows,
              DeviceSpan logits);

 private:
  const ModelConfig& config_;
  const bool learned_positions_;
  Backend& backend_;
  const SpanType activations_;
  std::vector<float> inv_freq_;
  DeviceSpan normed_, q_, k_, v_, attn_, proj_, up_, gate_;  // max_rows rows each
};

}  // namespace strata
