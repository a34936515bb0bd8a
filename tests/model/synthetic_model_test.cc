// Synthetic models: the weights' distribution, that any range of a tensor is made the same
// whichever way and in whatever pieces it is asked for, and that weights made on demand are those
// made in memory, byte for byte.
#include "src/model/synthetic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "src/model/store.h"

namespace strata {
namespace {

// An OPT-like config: biases, LayerNorm, learned positions, untied output projection.
ModelConfig OptLike() {
  ModelConfig c;
  c.arch = Architecture::kOpt;
  c.vocab_size = 300;
  c.hidden_size = 64;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  c.norm = NormKind::kLayerNorm;
  c.activation = Activation::kRelu;
  c.gated_mlp = false;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  c.use_rope = false;
  c.position_offset = 2;
  return c;
}

std::unique_ptr<Model> Make(const ModelConfig& c, DType dtype, uint64_t seed,
                            SyntheticWeights weights) {
  Result<std::unique_ptr<Model>> m = MakeSyntheticModel(c, dtype, seed, weights);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<uint8_t> Bytes(const Model& model, const TensorView& v) {
  std::vector<uint8_t> out(v.bytes());
  model.ReadTensorBytes(v, 0, out.size(), out.data());
  return out;
}

TEST(SyntheticModelTest, MatricesAreUniformNormsOneBiasesZero) {
  auto model = Make(OptLike(), DType::kF32, 7, SyntheticWeights::kInMemory);
  ASSERT_NE(model, nullptr);
  ModelWeights w = model->weights();
  for (const WeightSlot& s : WeightSlots(model->config(), &w)) {
    SCOPED_TRACE(s.name);
    const TensorView& v = *s.view;
    ASSERT_EQ(v.dtype, DType::kF32);
    ASSERT_EQ(v.shape, s.shape);
    const auto* x = static_cast<const float*>(v.data);
    const int64_t n = v.numel();
    if (v.shape.size() == 1) {
      const float want = s.name.ends_with("norm") ? 1.0f : 0.0f;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], want) << i;
      continue;
    }
    const double a = 1.0 / std::sqrt(static_cast<double>(v.dim(1)));
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LT(std::abs(x[i]), a) << i;
      sum += x[i];
      sum_sq += static_cast<double>(x[i]) * x[i];
    }
    // Uniform in (-a, a): mean 0, variance a^2 / 3 (within a few standard errors).
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 5 * a / std::sqrt(3.0 * n));
    EXPECT_NEAR(var / (a * a / 3), 1.0, 0.05);
  }
}

TEST(SyntheticModelTest, TensorsAndSeedsDiffer) {
  auto a = Make(OptLike(), DType::kF16, 1, SyntheticWeights::kInMemory);
  auto b = Make(OptLike(), DType::kF16, 2, SyntheticWeights::kInMemory);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const LayerWeights& l = a->weights().layers[0];
  // Two matrices of one shape are not the same numbers, nor one matrix under two seeds.
  EXPECT_NE(Bytes(*a, l.wq), Bytes(*a, l.wk));
  EXPECT_NE(Bytes(*a, l.wq), Bytes(*b, b->weights().layers[0].wq));
  // The same seed gives the same model.
  auto again = Make(OptLike(), DType::kF16, 1, SyntheticWeights::kInMemory);
  EXPECT_EQ(Bytes(*a, l.wq), Bytes(*again, again->weights().layers[0].wq));
}

// F16 and BF16 weights are the F32 ones rounded.
TEST(SyntheticModelTest, HalfWeightsAreTheFloatOnesRounded) {
  auto f32 = Make(OptLike(), DType::kF32, 3, SyntheticWeights::kInMemory);
  auto f16 = Make(OptLike(), DType::kF16, 3, SyntheticWeights::kInMemory);
  auto bf16 = Make(OptLike(), DType::kBF16, 3, SyntheticWeights::kInMemory);
  const TensorView& x = f32->weights().layers[1].w_up;
  const auto* want = static_cast<const float*>(x.data);
  const auto* h = static_cast<const uint16_t*>(f16->weights().layers[1].w_up.data);
  const auto* b = static_cast<const uint16_t*>(bf16->weights().layers[1].w_up.data);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(h[i], FloatToHalf(want[i])) << i;
    ASSERT_NEAR(Bf16ToFloat(b[i]), want[i], std::abs(want[i]) / 128) << i;
  }
}

// Weights made on demand are the in-memory ones, whole or in any pieces, in any order; their
// views are distinct, tied where the config ties them, and the model's sizes are the same.
TEST(SyntheticModelTest, WeightsMadeOnDemandAreTheInMemoryOnesInAnyPieces) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    ModelConfig c = OptLike();
    c.tie_word_embeddings = true;
    auto held = Make(c, dtype, 5, SyntheticWeights::kInMemory);
    auto made = Make(c, dtype, 5, SyntheticWeights::kOnDemand);
    ASSERT_NE(held, nullptr);
    ASSERT_NE(made, nullptr);
    EXPECT_FALSE(held->weights_on_demand());
    EXPECT_TRUE(made->weights_on_demand());
    EXPECT_EQ(made->weight_bytes(), held->weight_bytes());
    EXPECT_EQ(made->weights().lm_head.data, made->weights().token_embedding.data);
    ModelWeights hw = held->weights(), mw = made->weights();
    const std::vector<WeightSlot> hs = WeightSlots(c, &hw), ms = WeightSlots(c, &mw);
    ASSERT_EQ(hs.size(), ms.size());
    for (size_t t = 0; t < hs.size(); ++t) {
      SCOPED_TRACE(hs[t].name);
      const TensorView& h = *hs[t].view;
      const TensorView& m = *ms[t].view;
      ASSERT_EQ(m.shape, h.shape);
      ASSERT_TRUE(m.present());
      const std::vector<uint8_t> want = Bytes(*held, h);
      EXPECT_EQ(Bytes(*made, m), want);
      // Backwards, in pieces of 1 to 7 elements: each piece as the whole tensor has it.
      const uint64_t size = DTypeBytes(dtype);
      std::vector<uint8_t> pieces(want.size());
      for (uint64_t end = want.size(), k = 0; end > 0; ++k) {
        const uint64_t n = std::min(end, (1 + k % 7) * size);
        made->ReadTensorBytes(m, end - n, n, pieces.data() + end - n);
        end -= n;
      }
      EXPECT_EQ(pieces, want);
    }
  }
}

// A large tensor is made in parallel; its bytes are those made a small piece at a time, each on
// the calling thread.
TEST(SyntheticModelTest, ParallelAndPiecewiseMakingAgree) {
  ModelConfig c = OptLike();
  c.vocab_size = 40000;  // a 40000 x 64 embedding: past the size made on one thread
  auto made = Make(c, DType::kF16, 9, SyntheticWeights::kOnDemand);
  ASSERT_NE(made, nullptr);
  const TensorView& e = made->weights().token_embedding;
  const std::vector<uint8_t> whole = Bytes(*made, e);
  std::vector<uint8_t> pieces(whole.size());
  const uint64_t piece = 4096 + 6;  // not a multiple of a hash's four elements
  for (uint64_t at = 0; at < whole.size(); at += piece) {
    const uint64_t n = std::min(piece, whole.size() - at);
    made->ReadTensorBytes(e, at, n, pieces.data() + at);
  }
  EXPECT_EQ(pieces, whole);
}

}  // namespace
}  // namespace strata
