#include "src/model/synthetic_model.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "src/model/model_builder.h"

namespace strata {
namespace {

class WeightMaker {
 public:
  WeightMaker(ModelBuilder& builder, DType dtype, uint64_t seed)
      : b_(builder), dtype_(dtype), state_(seed * 0x9E3779B97F4A7C15ull + 1) {}

  // A [rows, cols] matrix uniform in [-1/sqrt(cols), 1/sqrt(cols)].
  TensorView Matrix(int64_t rows, int64_t cols) {
    const float a = 1.0f / std::sqrt(static_cast<float>(cols));
    return Make({rows, cols}, [&] { return a * (2.0f * Uniform() - 1.0f); });
  }
  TensorView Vector(int64_t n, float value) { return Make({n}, [&] { return value; }); }

 private:
  float Uniform() {
    // xorshift64*: fast and good enough for weights nobody reads.
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<float>((state_ * 0x2545F4914F6CDD1Dull) >> 40) * 0x1.0p-24f;
  }

  template <typename Gen>
  TensorView Make(std::vector<int64_t> shape, Gen gen) {
    TensorView v{dtype_, std::move(shape), nullptr};
    const size_t n = static_cast<size_t>(v.numel());
    // Builder buffers are floats; halves take half as many.
    float* buf = b_.NewBuffer(dtype_ == DType::kF32 ? n : (n + 1) / 2);
    if (dtype_ == DType::kF32) {
      for (size_t i = 0; i < n; ++i) buf[i] = gen();
    } else {
      auto* h = reinterpret_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) {
        const float f = gen();
        if (dtype_ == DType::kF16) {
          h[i] = FloatToHalf(f);
        } else {
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          h[i] = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
        }
      }
    }
    v.data = buf;
    return v;
  }

  ModelBuilder& b_;
  DType dtype_;
  uint64_t state_;
};

}  // namespace

Result<std::unique_ptr<Model>> MakeSyntheticModel(const ModelConfig& config, DType dtype,
                                                  uint64_t seed) {
  STRATA_RETURN_IF_ERROR(config.Validate());
  ModelBuilder builder("synthetic");
  builder.config() = config;
  WeightMaker make(builder, dtype, seed);
  const ModelConfig& c = config;
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const bool layer_norm = c.norm == NormKind::kLayerNorm;
  ModelWeights& w = builder.weights();
  w.token_embedding = make.Matrix(c.vocab_size, h);
  if (!c.use_rope) {
    w.position_embedding = make.Matrix(c.max_position_embeddings + c.position_offset, h);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = make.Vector(h, 1.0f);
    if (layer_norm) lw.attn_norm_bias = make.Vector(h, 0.0f);
    lw.wq = make.Matrix(q, h);
    lw.wk = make.Matrix(kv, h);
    lw.wv = make.Matrix(kv, h);
    lw.wo = make.Matrix(h, q);
    if (c.attention_bias) {
      lw.bq = make.Vector(q, 0.0f);
      lw.bk = make.Vector(kv, 0.0f);
      lw.bv = make.Vector(kv, 0.0f);
    }
    if (c.attention_output_bias) lw.bo = make.Vector(h, 0.0f);
    if (c.qk_norm) {
      lw.q_norm = make.Vector(c.head_dim, 1.0f);
      lw.k_norm = make.Vector(c.head_dim, 1.0f);
    }
    lw.mlp_norm = make.Vector(h, 1.0f);
    if (layer_norm) lw.mlp_norm_bias = make.Vector(h, 0.0f);
    if (c.gated_mlp) lw.w_gate = make.Matrix(f, h);
    lw.w_up = make.Matrix(f, h);
    lw.w_down = make.Matrix(h, f);
    if (c.mlp_bias) {
      if (c.gated_mlp) lw.b_gate = make.Vector(f, 0.0f);
      lw.b_up = make.Vector(f, 0.0f);
      lw.b_down = make.Vector(h, 0.0f);
    }
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = make.Vector(h, 1.0f);
  if (layer_norm) w.final_norm_bias = make.Vector(h, 0.0f);
  w.lm_head = c.tie_word_embeddings ? w.token_embedding : make.Matrix(c.vocab_size, h);
  return builder.Finish();
}

}  // namespace strata
