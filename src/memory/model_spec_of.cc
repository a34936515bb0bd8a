#include "src/memory/model_spec_of.h"

#include <set>

namespace strata {

DType WeightDTypeOf(const Model& model) {
  const ModelWeights& w = model.weights();
  bool bf16 = false, f16 = false;
  auto note = [&](const TensorView& t) {
    bf16 = bf16 || (t.present() && t.dtype == DType::kBF16);
    f16 = f16 || (t.present() && t.dtype == DType::kF16);
  };
  for (const TensorView* t : {&w.token_embedding, &w.position_embedding, &w.final_norm,
                              &w.final_norm_bias, &w.lm_head}) {
    note(*t);
  }
  for (const LayerWeights& layer : w.layers) {
    for (TensorView LayerWeights::*field : kLayerTensorFields<TensorView>) note(layer.*field);
  }
  return bf16 ? DType::kBF16 : f16 ? DType::kF16 : DType::kF32;
}

Result<ModelSpec> ModelSpecOf(const Model& model, int activation_dtype_bytes) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  std::set<DType> dtypes;
  std::set<bool> qkv_biases, other_biases;
  auto note = [&](const TensorView& t) {  // 4-bit matrices are accounted as plan.compress_weight
    if (t.present() && t.dtype != DType::kQ4) dtypes.insert(t.dtype);
  };
  for (const TensorView* t : {&w.token_embedding, &w.position_embedding, &w.final_norm,
                              &w.final_norm_bias, &w.lm_head}) {
    note(*t);
  }
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t :
         {&l.attn_norm, &l.attn_norm_bias, &l.wq,     &l.wk,     &l.wv,   &l.wo,
          &l.bq,        &l.q_norm,         &l.k_norm, &l.bk,     &l.bv,   &l.bo,
          &l.mlp_norm,  &l.mlp_norm_bias,  &l.w_gate, &l.b_gate, &l.w_up, &l.w_down,
          &l.b_up,      &l.b_down}) {
      note(*t);
    }
    for (const TensorView* b : {&l.bq, &l.bk, &l.bv}) qkv_biases.insert(b->present());
    for (const TensorView* b : {&l.bo, &l.b_up, &l.b_down}) other_biases.insert(b->present());
    if (c.gated_mlp) other_biases.insert(l.b_gate.present());
  }
  if (dtypes.size() != 1) {
    return Status::Unsupported(model.source() + " mixes weight dtypes; the plan's accounting "
                               "assumes one");
  }
  // The accounting knows biases on every projection (linear_bias) or on q/k/v alone (qkv_bias).
  const bool all_qkv = qkv_biases == std::set<bool>{true};
  const bool all_other = other_biases == std::set<bool>{true};
  if (qkv_biases.size() > 1 || other_biases.size() > 1 || (all_other && !all_qkv)) {
    return Status::Unsupported(model.source() +
                               " has biases on some projections only; the "
                               "plan's accounting knows them on all, or on q/k/v alone");
  }
  ModelSpec s;
  s.name = model.source();
  s.num_layers = c.num_layers;
  s.hidden_size = c.hidden_size;
  s.intermediate_size = c.intermediate_size;
  s.num_heads = c.num_heads;
  s.num_kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.vocab_size = c.vocab_size;
  s.max_position_embeddings = c.max_position_embeddings;
  s.gated_mlp = c.gated_mlp;
  s.linear_bias = all_other;
  s.qkv_bias = all_qkv && !all_other;
  s.norm_bias = !w.layers.empty() && w.layers[0].attn_norm_bias.present();
  s.qk_norm = c.qk_norm;
  s.position_embedding_rows =
      w.position_embedding.present() ? static_cast<int>(w.position_embedding.dim(0)) : 0;
  s.tie_word_embeddings = w.lm_head.data == w.token_embedding.data;
  s.weight_dtype_bytes = static_cast<int>(DTypeBytes(*dtypes.begin()));
  s.q4_weights = model.has_q4_weights();
  s.q4_group = model.q4_group();
  s.activation_dtype_bytes = activation_dtype_bytes;
  STRATA_RETURN_IF_ERROR(s.Validate());
  return s;
}

}  // namespace strata
