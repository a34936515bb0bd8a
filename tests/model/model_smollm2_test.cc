// The default model, SmolLM2-135M-Instruct Q4_1 GGUF, when scripts/setup.sh has fetched it.
// Dequantized values are checked against tests/data/smollm2/dequant_probe.json, written by gguf-py
// (token_embd, Q8_0) and transformers' GGUF loader (attn_q/attn_k, Q4_1, un-permuted).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "src/model/json_file.h"
#include "src/model/model.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::DefaultModelPath;

class SmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = DefaultModelPath();
    if (!std::filesystem::exists(path)) return;
    auto m = LoadModel(path.string());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "default model not found at " << DefaultModelPath();
  }
  static Model* model_;
};

Model* SmolLm2Test::model_ = nullptr;

TEST_F(SmolLm2Test, Config) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::kNone);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(model_->weights().lm_head.data, model_->weights().token_embedding.data);
  // 134,515,008 parameters, all expanded to F32.
  EXPECT_EQ(model_->weight_bytes(), uint64_t{134515008} * 4);
}

TEST_F(SmolLm2Test, Tokenizer) {
  const GgufTokenizerData& t = model_->gguf_tokenizer();
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.pre, "smollm");
  EXPECT_EQ(t.tokens.size(), 49152u);
  EXPECT_EQ(t.token_types.size(), 49152u);
  EXPECT_EQ(t.merges.size(), 48900u);
  EXPECT_EQ(t.tokens[1], "<|im_start|>");
  EXPECT_EQ(t.tokens[2], "<|im_end|>");
  EXPECT_EQ(t.bos_token_id, 1);
  EXPECT_EQ(t.eos_token_id, 2);
  EXPECT_EQ(t.pad_token_id, 2);
  EXPECT_EQ(t.add_bos, false);
  EXPECT_NE(model_->chat_template().find("<|im_start|>"), std::string::npos);
}

TEST_F(SmolLm2Test, DequantMatchesReference) {
  auto probe =
      ReadJsonFile(std::string(STRATA_SOURCE_DIR) + "/tests/data/smollm2/dequant_probe.json");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  const ModelWeights& w = model_->weights();
  const std::regex layer_re(R"(blk\.(\d+)\.attn_([qk])\.weight)");
  int checked = 0;
  for (const nlohmann::json& p : (*probe)["probes"]) {
    const std::string name = p["tensor"].get<std::string>();
    const TensorView* view = nullptr;
    std::smatch m;
    if (name == "token_embd.weight") {
      view = &w.token_embedding;
    } else if (std::regex_match(name, m, layer_re)) {
      const LayerWeights& l = w.layers.at(std::stoul(m[1].str()));
      view = m[2] == "q" ? &l.wq : &l.wk;
    }
    ASSERT_NE(view, nullptr) << name;
    const int64_t index = p["index"].get<int64_t>();
    ASSERT_LT(index, view->numel()) << name;
    const float got = static_cast<const float*>(view->data)[index];
    EXPECT_NEAR(got, p["value"].get<double>(), 1e-6) << name << " [" << index << "]";
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST_F(SmolLm2Test, FourBitWeightsAreTheFilesQ4_1Blocks) {
  // Every projection is Q4_1: its 4-bit planes are its blocks, so they expand to exactly the fp32
  // the model loaded (q and k un-permuted alike). The Q8_0 embedding has no 4-bit blocks.
  EXPECT_EQ(model_->q4_group(), 32);
  const ModelWeights& w = model_->weights();
  std::vector<uint8_t> codes;
  std::vector<uint16_t> params;
  EXPECT_FALSE(model_->GgufQ4Planes(w.token_embedding, nullptr, nullptr));
  int checked = 0;
  for (const int layer : {0, 17, 29}) {
    const LayerWeights& l = w.layers.at(static_cast<size_t>(layer));
    for (const TensorView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      const int64_t rows = v->dim(0), cols = v->dim(1);
      codes.assign(static_cast<size_t>(rows * cols / 2), 0);
      params.assign(static_cast<size_t>(rows * cols / 32 * 2), 0);
      ASSERT_TRUE(model_->GgufQ4Planes(*v, codes.data(), params.data()));
      const auto* want = static_cast<const float*>(v->data);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const int64_t g = i / 32, k = i % 32;  // kernels/cpu/weight_q4.h's layout, groups of 32
        const uint8_t byte = codes[static_cast<size_t>(16 * g + k % 16)];
        const float got = static_cast<float>(k < 16 ? byte & 0x0F : byte >> 4) *
                              HalfToFloat(params[static_cast<size_t>(2 * g)]) +
                          HalfToFloat(params[static_cast<size_t>(2 * g + 1)]);
        ASSERT_EQ(got, want[i]) << "layer " << layer << " element " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 21);
}

}  // namespace
}  // namespace strata
