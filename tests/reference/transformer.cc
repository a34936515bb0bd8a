// Frozen reference for tests (see transformer.h): every op is the CPU backend's kernels/cpu
// calls, made here directly on purpose.
#include "tests/reference/transformer.h"

#include <algorithm>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/weight_q4.h"
#include "src/core/check.h"

namespace strata::reference {
namespace {

namespace k = kernels::cpu;

// Rows of a non-F32 weight converted per GEMM panel (the CPU backend's kPanelRows).
constexpr int kPanelRows = 256;

k::RopeParams RopeFor(const ModelConfig& c) {
  k::RopeParams p;
  p.head_dim = c.head_dim;
  p.theta = c.rope_theta;
  p.factor = c.rope_scaling.factor;
  p.low_freq_factor = c.rope_scaling.low_freq_factor;
  p.high_freq_factor = c.rope_scaling.high_freq_factor;
  p.original_max_positions = c.rope_scaling.original_max_position_embeddings;
  switch (c.rope_scaling.kind) {
    case RopeScalingKind::kNone: p.scaling = k::RopeScalingKind::kNone; break;
    case RopeScalingKind::kLinear: p.scaling = k::RopeScalingKind::kLinear; break;
    case RopeScalingKind::kLlama3: p.scaling = k::RopeScalingKind::kLlama3; break;
    case RopeScalingKind::kFactors:
      p.scaling = k::RopeScalingKind::kFactors;
      p.freq_factors = c.rope_scaling.freq_factors.data();
      break;
    case RopeScalingKind::kYarn:
      p.scaling = k::RopeScalingKind::kYarn;
      p.beta_fast = c.rope_scaling.beta_fast;
      p.beta_slow = c.rope_scaling.beta_slow;
      p.truncate = c.rope_scaling.truncate;
      break;
  }
  return p;
}

}  // namespace

Transformer::Transformer(const Model& model, const ModelWeights* weights)
    : config_(model.config()), weights_(weights != nullptr ? *weights : model.weights()) {
  if (config_.use_rope) {
    inv_freq_.resize(static_cast<size_t>(config_.head_dim / 2));
    k::RopeInverseFrequencies(RopeFor(config_), inv_freq_.data());
  }
}

float* Transformer::Workspace(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

void Transformer::Embed(const StepInput& in, float* hidden) {
  const int rows = static_cast<int>(in.tokens.size());
  EmbedRows(weights_.token_embedding, in.tokens.data(), rows, hidden);
  const TensorView& pos_table = weights_.position_embedding;
  if (!pos_table.present()) return;
  STRATA_CHECK(in.positions.size() == in.tokens.size());
  const int64_t h = pos_table.dim(1);
  row_.resize(static_cast<size_t>(h));
  for (int i = 0; i < rows; ++i) {
    const int32_t position_row = in.positions[static_cast<size_t>(i)] + config_.position_offset;
    EmbedRows(pos_table, &position_row, 1, row_.data());
    Add(hidden + i * h, row_.data(), h);
  }
}

void Transformer::AttentionLayer(int layer, const StepInput& in, KvCache& cache, float* hidden) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const int rows = in.batch * in.new_tokens;
  const size_t h = static_cast<size_t>(c.hidden_size);
  const size_t q_width = static_cast<size_t>(c.num_heads) * c.head_dim;
  const size_t kv_width = static_cast<size_t>(c.num_kv_heads) * c.head_dim;
  float* normed = Workspace(normed_, rows * h);
  Norm(hidden, w.attn_norm, w.attn_norm_bias, rows, c.hidden_size, normed);
  float* q = Workspace(q_, rows * q_width);
  float* keys = Workspace(k_, rows * kv_width);
  float* values = Workspace(v_, rows * kv_width);
  Linear(normed, rows, w.wq, w.bq, q);
  Linear(normed, rows, w.wk, w.bk, keys);
  Linear(normed, rows, w.wv, w.bv, values);
  if (w.q_norm.present()) {  // each head's slice is a row of head_dim
    k::RmsNorm(q, Floats(w.q_norm, 0), c.norm_eps, rows * c.num_heads, c.head_dim, q);
    k::RmsNorm(keys, Floats(w.k_norm, 0), c.norm_eps, rows * c.num_kv_heads, c.head_dim, keys);
  }
  if (c.use_rope) {
    k::ApplyRope(q, in.positions.data(), rows, c.num_heads, c.head_dim, inv_freq_.data());
    k::ApplyRope(keys, in.positions.data(), rows, c.num_kv_heads, c.head_dim, inv_freq_.data());
  }
  float* attn = Workspace(attn_, rows * q_width);
  cache.Write(layer, keys, values, in.new_tokens, in.cache_len - in.new_tokens, in.start.data());

  k::AttentionShape shape;
  shape.batch = in.batch;
  shape.new_tokens = in.new_tokens;
  shape.num_heads = c.num_heads;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.max_len = cache.max_len();
  shape.cache_len = in.cache_len;
  shape.scale = c.AttentionScale();
  if (!cache.options().compress) {
    k::CausalAttention(shape, q, cache.keys(layer), cache.values(layer), in.start.data(), attn);
  } else if (in.new_tokens == 1) {
    k::DecodeAttentionQ4Shape s;
    s.batch = in.batch;
    s.num_heads = c.num_heads;
    s.num_kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.max_len = cache.max_len();
    s.cache_len = in.cache_len;
    s.scale = shape.scale;
    cache.DecodeAttention(layer, s, q, in.start.data(), attn);
  } else {
    PrefillOnCompressedCache(layer, in, cache, shape, q, keys, values, attn);
  }
  float* proj = Workspace(proj_, rows * h);
  Linear(attn, rows, w.wo, w.bo, proj);
  Add(hidden, proj, static_cast<int64_t>(rows * h));
}

void Transformer::PrefillOnCompressedCache(int layer, const StepInput& in, const KvCache& cache,
                                           k::AttentionShape shape, const float* q,
                                           const float* keys, const float* values, float* attn) {
  // Slots before this step come back from the cache; this step's own keys and values are the
  // fp32 rows just computed, so a prompt attends to itself without quantization error.
  const int d = config_.head_dim;
  const int kv_heads = config_.num_kv_heads;
  const int first = in.cache_len - in.new_tokens;
  const size_t n = static_cast<size_t>(in.batch) * kv_heads * in.cache_len * d;
  float* kf = Workspace(k_f32_, n);
  float* vf = Workspace(v_f32_, n);
  cache.ExpandSlots(layer, first, in.cache_len, kf, vf, in.start.data());
  for (int b = 0; b < in.batch; ++b) {
    for (int t = 0; t < in.new_tokens; ++t) {
      for (int h = 0; h < kv_heads; ++h) {
        const size_t src = ((static_cast<size_t>(b) * in.new_tokens + t) * kv_heads + h) * d;
        const size_t dst = ((static_cast<size_t>(b) * kv_heads + h) * in.cache_len + first + t) * d;
        std::copy_n(keys + src, d, kf + dst);
        std::copy_n(values + src, d, vf + dst);
      }
    }
  }
  shape.max_len = in.cache_len;
  k::CausalAttention(shape, q, kf, vf, in.start.data(), attn);
}

void Transformer::MlpLayer(int layer, int rows, float* hidden) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const size_t h = static_cast<size_t>(c.hidden_size);
  const int64_t inter = static_cast<int64_t>(rows) * c.intermediate_size;

  float* normed = Workspace(normed_, rows * h);
  Norm(hidden, w.mlp_norm, w.mlp_norm_bias, rows, c.hidden_size, normed);
  float* up = Workspace(up_, static_cast<size_t>(inter));
  Linear(normed, rows, w.w_up, w.b_up, up);
  float* act = up;
  if (c.gated_mlp) {
    float* gate = Workspace(gate_, static_cast<size_t>(inter));
    Linear(normed, rows, w.w_gate, w.b_gate, gate);
    k::SiluMul(gate, up, static_cast<size_t>(inter));
    act = gate;
  } else if (c.activation == Activation::kGelu) {
    k::Gelu(up, static_cast<size_t>(inter));
  } else {
    k::Relu(up, static_cast<size_t>(inter));
  }
  float* proj = Workspace(proj_, rows * h);
  Linear(act, rows, w.w_down, w.b_down, proj);
  Add(hidden, proj, static_cast<int64_t>(rows * h));
}

void Transformer::Logits(const float* hidden, int rows, float* logits) {
  const ModelConfig& c = config_;
  float* normed = Workspace(normed_, static_cast<size_t>(rows) * c.hidden_size);
  Norm(hidden, weights_.final_norm, weights_.final_norm_bias, rows, c.hidden_size, normed);
  Linear(normed, rows, weights_.lm_head, TensorView{}, logits);
}

void Transformer::Linear(const float* x, int m, const TensorView& w, const TensorView& bias,
                         float* y) {
  STRATA_CHECK(w.shape.size() == 2);
  const int out = static_cast<int>(w.dim(0));
  const int in = static_cast<int>(w.dim(1));
  if (w.dtype == DType::kF32) {
    k::GemmNT(m, out, in, x, static_cast<const float*>(w.data), y, out, false);
  } else if (w.dtype == DType::kQ4) {
    const auto* planes = static_cast<const Q4Planes*>(w.data);
    expanded_.resize(static_cast<size_t>(out) * in);
    k::ExpandWeightQ4(planes->codes, planes->params, out, in, planes->group, expanded_.data());
    k::GemmNT(m, out, in, x, expanded_.data(), y, out, false);
  } else {
    panel_.resize(static_cast<size_t>(kPanelRows) * in);
    const auto* base = static_cast<const uint8_t*>(w.data);
    const size_t row_elems = static_cast<size_t>(in);
    for (int r0 = 0; r0 < out; r0 += kPanelRows) {
      const int rows = std::min(kPanelRows, out - r0);
      const uint8_t* src = base + static_cast<size_t>(r0) * in * 2;
#pragma omp parallel for schedule(static)
      for (int r = 0; r < rows; ++r) {
        ConvertToFloat(w.dtype, src + r * row_elems * 2, panel_.data() + r * row_elems, row_elems);
      }
      k::GemmNT(m, rows, in, x, panel_.data(), y + r0, out, false);
    }
  }
  if (bias.present()) {
    const float* b = Floats(bias, 0);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; ++i) {
      float* yr = y + static_cast<long>(i) * out;
      for (int j = 0; j < out; ++j) yr[j] += b[j];
    }
  }
}

void Transformer::EmbedRows(const TensorView& table, const int32_t* ids, int n, float* out) {
  const int64_t hidden = table.dim(1);
  if (table.dtype == DType::kQ4) {
    const auto* planes = static_cast<const Q4Planes*>(table.data);
    const int64_t params_per_row = hidden / planes->group * 2;
    for (int i = 0; i < n; ++i) {
      STRATA_CHECK(ids[i] >= 0 && ids[i] < table.dim(0));
      k::ExpandWeightQ4(planes->codes + ids[i] * hidden / 2,
                        planes->params + ids[i] * params_per_row, 1, hidden, planes->group,
                        out + i * hidden);
    }
    return;
  }
  const size_t row_bytes = static_cast<size_t>(hidden) * DTypeBytes(table.dtype);
  const auto* base = static_cast<const uint8_t*>(table.data);
  for (int i = 0; i < n; ++i) {
    STRATA_CHECK(ids[i] >= 0 && ids[i] < table.dim(0));
    ConvertToFloat(table.dtype, base + static_cast<size_t>(ids[i]) * row_bytes,
                   out + static_cast<int64_t>(i) * hidden, static_cast<size_t>(hidden));
  }
}

void Transformer::Norm(const float* x, const TensorView& w, const TensorView& b, int rows,
                       int dim, float* y) {
  if (config_.norm == NormKind::kLayerNorm) {
    k::LayerNorm(x, Floats(w, 0), b.present() ? Floats(b, 1) : nullptr, config_.norm_eps, rows,
                 dim, y);
  } else {
    k::RmsNorm(x, Floats(w, 0), config_.norm_eps, rows, dim, y);
  }
}

void Transformer::Add(float* x, const float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

const float* Transformer::Floats(const TensorView& t, int slot) {
  if (t.dtype == DType::kF32) return static_cast<const float*>(t.data);
  std::vector<float>& buf = vectors_[slot];
  buf.resize(static_cast<size_t>(t.numel()));
  ConvertToFloat(t.dtype, t.data, buf.data(), buf.size());
  return buf.data();
}

}  // namespace strata::reference
