// The default model, SmolLM2-135M-Instruct Q4_1 GGUF, when scripts/setup.sh has fetched it.
// Dequantized values are checked against tests/data/smollm2/dequant_probe.json, written by gguf-py
// (token_embd, Q8_0) and transformers' GGUF loader (attn_q/attn_k, Q4_1, un-permuted).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "src/model/json_file.h"
#include "src/model/model.h"

namespace strata {
namespace {

std::filesystem::path DefaultModelPath() {
  std::filesystem::path cache;
  if (const char* s = std::getenv("STRATA_CACHE"); s != nullptr && *s != '\0') {
    cache = s;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    cache = std::filesystem::path(x) / "strata";
  } else if (const char* h = std::getenv("HOME"); h != nullptr) {
    cache = std::filesystem::path(h) / ".cache" / "strata";
  }
  return cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

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

}  // namespace
}  // namespace strata
