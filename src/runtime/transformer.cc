#include "src/runtime/transformer.h"

#include <cmath>

#include "src/core/check.h"

namespace strata {
namespace {

kernels::cpu::RopeParams RopeFor(const ModelConfig& c) {
  kernels::cpu::RopeParams p;
  p.head_dim = c.head_dim;
  p.theta = c.rope_theta;
  p.factor = c.rope_scaling.factor;
  p.low_freq_factor = c.rope_scaling.low_freq_factor;
  p.high_freq_factor = c.rope_scaling.high_freq_factor;
  p.original_max_positions = c.rope_scaling.original_max_position_embeddings;
  switch (c.rope_scaling.kind) {
    case RopeScalingKind::kNone: p.scaling = kernels::cpu::RopeScalingKind::kNone; break;
    case RopeScalingKind::kLinear: p.scaling = kernels::cpu::RopeScalingKind::kLinear; break;
    case RopeScalingKind::kLlama3: p.scaling = kernels::cpu::RopeScalingKind::kLlama3; break;
  }
  return p;
}

}  // namespace

Transformer::Transformer(const Model& model, Backend& backend)
    : model_(model), config_(model.config()), backend_(backend) {
  if (config_.use_rope) {
    inv_freq_.resize(static_cast<size_t>(config_.head_dim / 2));
    kernels::cpu::RopeInverseFrequencies(RopeFor(config_), inv_freq_.data());
  }
}

float* Transformer::Workspace(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

void Transformer::Embed(const StepInput& in, float* hidden) {
  const int rows = in.batch * in.new_tokens;
  const ModelWeights& w = model_.weights();
  backend_.Embed(w.token_embedding, in.tokens.data(), rows, hidden);
  if (w.position_embedding.present()) {
    std::vector<int32_t> pos(in.positions);
    for (int32_t& p : pos) p += config_.position_offset;
    backend_.AddPositionEmbedding(w.position_embedding, pos.data(), rows, hidden);
  }
}

void Transformer::AttentionLayer(int layer, const StepInput& in, KvCache& cache, float* hidden) {
  const LayerWeights& w = model_.weights().layers[static_cast<size_t>(layer)];
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
  if (c.use_rope) {
    backend_.Rope(q, in.positions.data(), rows, c.num_heads, c.head_dim, inv_freq_.data());
    backend_.Rope(k, in.positions.data(), rows, c.num_kv_heads, c.head_dim, inv_freq_.data());
  }
  cache.Write(layer, k, v, in.new_tokens, in.cache_len - in.new_tokens);

  AttentionShape shape;
  shape.batch = in.batch;
  shape.new_tokens = in.new_tokens;
  shape.num_heads = c.num_heads;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.max_len = cache.max_len();
  shape.cache_len = in.cache_len;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  float* attn = Workspace(attn_, rows * q_width);
  backend_.Attention(shape, q, cache.keys(layer), cache.values(layer), in.start.data(), attn);

  float* proj = Workspace(proj_, rows * h);
  backend_.Linear(attn, rows, w.wo, w.bo, proj);
  backend_.Add(hidden, proj, static_cast<int64_t>(rows * h));
}

void Transformer::MlpLayer(int layer, int rows, float* hidden) {
  const LayerWeights& w = model_.weights().layers[static_cast<size_t>(layer)];
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

void Transformer::Logits(const float* hidden, int rows, float* logits) {
  const ModelWeights& w = model_.weights();
  const ModelConfig& c = config_;
  float* normed = Workspace(normed_, static_cast<size_t>(rows) * c.hidden_size);
  if (c.norm == NormKind::kLayerNorm) {
    backend_.LayerNorm(hidden, w.final_norm, w.final_norm_bias, c.norm_eps, rows, c.hidden_size,
                       normed);
  } else {
    backend_.RmsNorm(hidden, w.final_norm, c.norm_eps, rows, c.hidden_size, normed);
  }
  backend_.Linear(normed, rows, w.lm_head, TensorView{}, logits);
}

}  // namespace strata
