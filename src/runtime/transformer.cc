#include "src/runtime/transformer.h"

#include <algorithm>

#include "src/core/check.h"

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

Transformer::Transformer(const Model& model, Backend& backend)
    : config_(model.config()),
      learned_positions_(model.weights().position_embedding.present()),
      backend_(backend) {
  if (config_.use_rope) {
    inv_freq_.resize(static_cast<size_t>(config_.head_dim / 2));
    RopeInverseFrequencies(RopeFor(config_), inv_freq_.data());
  }
}

float* Transformer::Workspace(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) {
    // Exactly n: a bare resize may double the capacity, and the plan counts these bytes.
    buf.reserve(n);
    buf.resize(n);
  }
  return buf.data();
}

std::vector<int32_t> Transformer::PositionRows(const StepInput& in) const {
  if (!learned_positions_) return {};
  std::vector<int32_t> rows(in.positions);
  for (int32_t& r : rows) r += config_.position_offset;
  return rows;
}

void Transformer::EmbedRows(std::span<const int32_t> token_rows,
                            std::span<const int32_t> position_rows,
                            const TensorView& token_embedding, const TensorView& position_embedding,
                            float* hidden) {
  const int rows = static_cast<int>(token_rows.size());
  backend_.Embed(token_embedding, token_rows.data(), rows, hidden);
  if (position_embedding.present()) {
    STRATA_CHECK(position_rows.size() == token_rows.size());
    backend_.AddPositionEmbedding(position_embedding, position_rows.data(), rows, hidden);
  }
}

Transformer::AttentionBuffers Transformer::AttentionInputs(const LayerWeights& w,
                                                           const StepInput& in,
                                                           const float* hidden) {
  const ModelConfig& c = config_;
  const int rows = in.batch * in.new_tokens;
  const size_t h = static_cast<size_t>(c.hidden_size);
  const size_t q_width = static_cast<size_t>(c.num_heads) * c.head_dim;
  const size_t kv_width = static_cast<size_t>(c.num_kv_heads) * c.head_dim;
  float* normed = Workspace(normed_, rows * h);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(hidden, w.attn_norm, w.attn_norm_bias, c.norm_eps, rows, c.hidden_size,
                       normed);
  } else {
    backend_.RmsNorm(hidden, w.attn_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  float* q = Workspace(q_, rows * q_width);
  float* k = Workspace(k_, rows * kv_width);
  float* v = Workspace(v_, rows * kv_width);
  backend_.Linear(normed, rows, w.wq, w.bq, q);
  backend_.Linear(normed, rows, w.wk, w.bk, k);
  backend_.Linear(normed, rows, w.wv, w.bv, v);
  if (w.q_norm.present()) {  // each head's slice is a row of head_dim
    backend_.RmsNorm(q, w.q_norm, c.norm_eps, rows * c.num_heads, c.head_dim, q);
    backend_.RmsNorm(k, w.k_norm, c.norm_eps, rows * c.num_kv_heads, c.head_dim, k);
  }
  if (c.use_rope) {
    backend_.Rope(q, in.positions.data(), rows, c.num_heads, c.head_dim, inv_freq_.data());
    backend_.Rope(k, in.positions.data(), rows, c.num_kv_heads, c.head_dim, inv_freq_.data());
  }
  return {q, k, v, Workspace(attn_, rows * q_width)};
}

void Transformer::AttentionOutput(const LayerWeights& w, int rows, const float* attn,
                                  float* hidden) {
  const size_t h = static_cast<size_t>(config_.hidden_size);
  float* proj = Workspace(proj_, rows * h);
  backend_.Linear(attn, rows, w.wo, w.bo, proj);
  backend_.Add(hidden, proj, static_cast<int64_t>(rows * h));
}

uint64_t Transformer::workspace_bytes() const {
  size_t n = 0;
  for (const std::vector<float>* b :
       {&normed_, &q_, &k_, &v_, &attn_, &proj_, &up_, &gate_}) {
    n += b->capacity();
  }
  return n * sizeof(float);
}

void Transformer::MlpLayer(const LayerWeights& w, int rows, float* hidden) {
  const ModelConfig& c = config_;
  const size_t h = static_cast<size_t>(c.hidden_size);
  const int64_t inter = static_cast<int64_t>(rows) * c.intermediate_size;

  float* normed = Workspace(normed_, rows * h);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(hidden, w.mlp_norm, w.mlp_norm_bias, c.norm_eps, rows, c.hidden_size,
                       normed);
  } else {
    backend_.RmsNorm(hidden, w.mlp_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  float* up = Workspace(up_, static_cast<size_t>(inter));
  backend_.Linear(normed, rows, w.w_up, w.b_up, up);
  float* act = up;
  if (c.gated_mlp) {
    float* gate = Workspace(gate_, static_cast<size_t>(inter));
    backend_.Linear(normed, rows, w.w_gate, w.b_gate, gate);
    backend_.SiluMul(gate, up, inter);
    act = gate;
  } else {
    backend_.Activate(c.activation == Activation::kGelu ? ActivationKind::kGelu
                                                        : ActivationKind::kRelu,
                      up, inter);
  }
  float* proj = Workspace(proj_, rows * h);
  backend_.Linear(act, rows, w.w_down, w.b_down, proj);
  backend_.Add(hidden, proj, static_cast<int64_t>(rows * h));
}

void Transformer::Logits(const TensorView& final_norm, const TensorView& final_norm_bias,
                         const TensorView& lm_head, const float* hidden, int rows,
                         float* logits) {
  const ModelConfig& c = config_;
  float* normed = Workspace(normed_, static_cast<size_t>(rows) * c.hidden_size);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(hidden, final_norm, final_norm_bias, c.norm_eps, rows, c.hidden_size,
                       normed);
  } else {
    backend_.RmsNorm(hidden, final_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  backend_.Linear(normed, rows, lm_head, TensorView{}, logits);
}

}  // namespace strata
