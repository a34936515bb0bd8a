#include "src/runtime/transformer.h"

#include "src/core/check.h"
#include "src/memory/placement.h"

namespace strata {
namespace {

RopeSpec RopeFor(const ModelConfig& c) {
  RopeSpec p;
  p.head_dim = c.head_dim;
  p.theta = c.rope_theta;
  p.factor = c.rope_scaling.factor;
  p.low_freq_factor = c.rope_scaling.low_freq_factor;
  p.high_freq_factor = c.rope_scaling.high_freq_factor;
  p.original_max_positions = c.rope_scaling.original_max_position_embeddings;
  switch (c.rope_scaling.kind) {
    case RopeScalingKind::kNone: p.scaling = RopeSpec::Scaling::kNone; break;
    case RopeScalingKind::kLinear: p.scaling = RopeSpec::Scaling::kLinear; break;
    case RopeScalingKind::kLlama3: p.scaling = RopeSpec::Scaling::kLlama3; break;
    case RopeScalingKind::kFactors:
      p.scaling = RopeSpec::Scaling::kFactors;
      p.freq_factors = c.rope_scaling.freq_factors.data();
      break;
    case RopeScalingKind::kYarn:
      p.scaling = RopeSpec::Scaling::kYarn;
      p.beta_fast = c.rope_scaling.beta_fast;
      p.beta_slow = c.rope_scaling.beta_slow;
      p.truncate = c.rope_scaling.truncate;
      break;
  }
  return p;
}

}  // namespace

Transformer::Transformer(const Model& model, Backend& backend, DeviceSpan workspace,
                         int64_t max_rows, SpanType activations)
    : config_(model.config()),
      learned_positions_(model.weights().position_embedding.present()),
      backend_(backend),
      activations_(activations) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;
  uint64_t at = 0;
  const auto carve = [&](int64_t width) {
    const uint64_t bytes = static_cast<uint64_t>(max_rows * width) * SpanElementBytes(activations);
    const DeviceSpan buffer = workspace.Sub(at, bytes, activations);
    at += bytes;
    return buffer;
  };
  normed_ = carve(h);
  q_ = carve(q_width);
  k_ = carve(kv_width);
  v_ = carve(kv_width);
  attn_ = carve(q_width);
  proj_ = carve(h);
  up_ = carve(inter);
  if (c.gated_mlp) gate_ = carve(inter);
  STRATA_CHECK(at == workspace.bytes() &&
               at == TransformerWorkspaceBytes(c, max_rows, activations));
  if (c.use_rope) {
    inv_freq_.resize(static_cast<size_t>(c.head_dim / 2));
    RopeInverseFrequencies(RopeFor(c), inv_freq_.data());
  }
}

DeviceSpan RowsOf(const DeviceSpan& buffer, int64_t rows, int64_t width, SpanType type) {
  return buffer.Sub(0, static_cast<uint64_t>(rows * width) * SpanElementBytes(type), type);
}

std::vector<int32_t> Transformer::PositionRows(const StepInput& in) const {
  if (!learned_positions_) return {};
  std::vector<int32_t> rows(in.positions);
  for (int32_t& r : rows) r += config_.position_offset;
  return rows;
}

void Transformer::EmbedRows(Stream& stream, std::span<const int32_t> token_rows,
                            std::span<const int32_t> position_rows,
                            const DeviceWeight& token_embedding,
                            const DeviceWeight& position_embedding, DeviceSpan hidden) {
  backend_.Embed(stream, token_embedding, token_rows, hidden);
  if (position_embedding.present()) {
    STRATA_CHECK(position_rows.size() == token_rows.size());
    backend_.AddPositionEmbedding(stream, position_embedding, position_rows, hidden);
  }
}

Transformer::AttentionBuffers Transformer::AttentionInputs(Stream& stream,
                                                           const DeviceLayerWeights& w,
                                                           const StepInput& in,
                                                           DeviceSpan hidden) {
  const ModelConfig& c = config_;
  const int rows = in.batch * in.new_tokens;
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  const DeviceSpan normed = RowsOf(normed_, rows, c.hidden_size, activations_);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(stream, hidden, w.attn_norm, w.attn_norm_bias, c.norm_eps, rows,
                       c.hidden_size, normed);
  } else {
    backend_.RmsNorm(stream, hidden, w.attn_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  const DeviceSpan q = RowsOf(q_, rows, q_width, activations_);
  const DeviceSpan k = RowsOf(k_, rows, kv_width, activations_);
  const DeviceSpan v = RowsOf(v_, rows, kv_width, activations_);
  backend_.Linear(stream, normed, rows, w.wq, w.bq, q);
  backend_.Linear(stream, normed, rows, w.wk, w.bk, k);
  backend_.Linear(stream, normed, rows, w.wv, w.bv, v);
  if (w.q_norm.present()) {  // each head's slice is a row of head_dim
    backend_.RmsNorm(stream, q, w.q_norm, c.norm_eps, rows * c.num_heads, c.head_dim, q);
    backend_.RmsNorm(stream, k, w.k_norm, c.norm_eps, rows * c.num_kv_heads, c.head_dim, k);
  }
  if (c.use_rope) {
    backend_.Rope(stream, q, in.positions, c.num_heads, c.head_dim, inv_freq_);
    backend_.Rope(stream, k, in.positions, c.num_kv_heads, c.head_dim, inv_freq_);
  }
  return {q, k, v, RowsOf(attn_, rows, q_width, activations_)};
}

void Transformer::AttentionOutput(Stream& stream, const DeviceLayerWeights& w, int rows,
                                  DeviceSpan attn, DeviceSpan hidden) {
  const DeviceSpan proj = RowsOf(proj_, rows, config_.hidden_size, activations_);
  backend_.Linear(stream, attn, rows, w.wo, w.bo, proj);
  backend_.Add(stream, hidden, proj);
}

void Transformer::MlpLayer(Stream& stream, const DeviceLayerWeights& w, int rows,
                           DeviceSpan hidden) {
  const ModelConfig& c = config_;
  const DeviceSpan normed = RowsOf(normed_, rows, c.hidden_size, activations_);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(stream, hidden, w.mlp_norm, w.mlp_norm_bias, c.norm_eps, rows,
                       c.hidden_size, normed);
  } else {
    backend_.RmsNorm(stream, hidden, w.mlp_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  const DeviceSpan up = RowsOf(up_, rows, c.intermediate_size, activations_);
  DeviceSpan act = up;
  if (c.gated_mlp) {
    backend_.Linear(stream, normed, rows, w.w_up, w.b_up, up);
    const DeviceSpan gate = RowsOf(gate_, rows, c.intermediate_size, activations_);
    backend_.Linear(stream, normed, rows, w.w_gate, w.b_gate, gate);
    backend_.SiluMul(stream, gate, up);
    act = gate;
  } else if (c.activation == Activation::kGelu) {
    // Not in the GEMM's epilogue: cuBLASLt's GELU is the tanh approximation, the models' the erf.
    backend_.Linear(stream, normed, rows, w.w_up, w.b_up, up);
    backend_.Activate(stream, ActivationKind::kGelu, up);
  } else {
    backend_.LinearRelu(stream, normed, rows, w.w_up, w.b_up, up);
  }
  const DeviceSpan proj = RowsOf(proj_, rows, c.hidden_size, activations_);
  backend_.Linear(stream, act, rows, w.w_down, w.b_down, proj);
  backend_.Add(stream, hidden, proj);
}

void Transformer::Logits(Stream& stream, const DeviceModelWeights& w, DeviceSpan hidden,
                         int rows, DeviceSpan logits) {
  const ModelConfig& c = config_;
  const DeviceSpan normed = RowsOf(normed_, rows, c.hidden_size, activations_);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(stream, hidden, w.final_norm, w.final_norm_bias, c.norm_eps, rows,
                       c.hidden_size, normed);
  } else {
    backend_.RmsNorm(stream, hidden, w.final_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  backend_.Linear(stream, normed, rows, w.lm_head, DeviceWeight{}, logits);
}

}  // namespace strata
