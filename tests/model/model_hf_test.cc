// LoadModel on small Hugging Face directories written by the test (Llama and OPT).
#include <gtest/gtest.h>

#include "src/model/model.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::Bf16Bytes;
using testing_files::F16Bytes;
using testing_files::F32Bytes;
using testing_files::FreshDir;
using testing_files::Pattern;
using testing_files::SafetensorsBytes;
using testing_files::SafetensorsEntry;
using testing_files::WriteFile;

// Adds tensor `name` of `shape` in `dtype` with pattern values, unless it is `skip`.
void Add(std::vector<SafetensorsEntry>* out, const std::string& name, std::vector<int64_t> shape,
         const std::string& dtype, const std::string& skip = "") {
  if (name == skip) return;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const std::vector<float> v = Pattern(static_cast<size_t>(n), static_cast<int>(out->size()));
  const std::string bytes = dtype == "F32"   ? F32Bytes(v)
                            : dtype == "F16" ? F16Bytes(v)
                                             : Bf16Bytes(v);
  out->push_back({name, dtype, std::move(shape), bytes});
}

constexpr char kLlamaConfig[] = R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 16,
  "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
  "rope_theta": 10000.0, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2})";

std::vector<SafetensorsEntry> LlamaTensors(const std::string& skip = "") {
  std::vector<SafetensorsEntry> t;
  Add(&t, "model.embed_tokens.weight", {32, 16}, "BF16", skip);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Add(&t, p + "input_layernorm.weight", {16}, "F32", skip);
    Add(&t, p + "self_attn.q_proj.weight", {16, 16}, "F16", skip);
    Add(&t, p + "self_attn.k_proj.weight", {8, 16}, "F16", skip);
    Add(&t, p + "self_attn.v_proj.weight", {8, 16}, "F16", skip);
    Add(&t, p + "self_attn.o_proj.weight", {16, 16}, "F16", skip);
    Add(&t, p + "post_attention_layernorm.weight", {16}, "F32", skip);
    Add(&t, p + "mlp.gate_proj.weight", {24, 16}, "BF16", skip);
    Add(&t, p + "mlp.up_proj.weight", {24, 16}, "BF16", skip);
    Add(&t, p + "mlp.down_proj.weight", {16, 24}, "BF16", skip);
  }
  Add(&t, "model.norm.weight", {16}, "F32", skip);
  Add(&t, "lm_head.weight", {32, 16}, "F32", skip);
  return t;
}

std::filesystem::path WriteLlamaDir(const std::vector<SafetensorsEntry>& tensors,
                                    size_t extra_header_bytes = 0) {
  const auto dir = FreshDir();
  WriteFile(dir / "config.json", kLlamaConfig);
  WriteFile(dir / "model.safetensors", SafetensorsBytes(tensors, extra_header_bytes));
  return dir;
}

void ExpectError(const std::filesystem::path& dir, StatusCode code, const std::string& needle) {
  auto m = LoadModel(dir.string());
  ASSERT_FALSE(m.ok()) << needle;
  EXPECT_EQ(m.status().code(), code) << m.status().ToString();
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
}

TEST(HfModelTest, Llama) {
  const auto dir = WriteLlamaDir(LlamaTensors());
  WriteFile(dir / "tokenizer.json", "{}");
  WriteFile(dir / "tokenizer_config.json", R"({"chat_template": "{{ hi }}"})");
  auto m = LoadModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().num_layers, 2);
  EXPECT_EQ((*m)->tokenizer_json_path(), (dir / "tokenizer.json").string());
  EXPECT_EQ((*m)->chat_template(), "{{ hi }}");
  EXPECT_TRUE((*m)->gguf_tokenizer().tokens.empty());
  const ModelWeights& w = (*m)->weights();
  EXPECT_EQ(w.token_embedding.dtype, DType::kBF16);
  EXPECT_EQ(w.token_embedding.shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(w.lm_head.dtype, DType::kF32);
  EXPECT_NE(w.lm_head.data, w.token_embedding.data);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[1].wk.shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(w.layers[1].wk.dtype, DType::kF16);
  EXPECT_EQ(w.layers[0].w_down.shape, (std::vector<int64_t>{16, 24}));
  EXPECT_FALSE(w.layers[0].bq.present());
  EXPECT_FALSE(w.position_embedding.present());
  // Views point into the map: the first F32 value of input_layernorm is Pattern(16, 1)[0].
  EXPECT_EQ(static_cast<const float*>(w.layers[0].attn_norm.data)[0], Pattern(16, 1)[0]);
  const uint64_t bytes = 32 * 16 * 2 + 16 * 4 + 32 * 16 * 4 +
                         2 * (2 * 16 * 4 + (16 * 16 * 2 + 8 * 16 * 2) * 2 + 3 * 24 * 16 * 2);
  EXPECT_EQ((*m)->weight_bytes(), bytes);
}

TEST(HfModelTest, MisalignedDataIsCopied) {
  auto m = LoadModel(WriteLlamaDir(LlamaTensors(), 1).string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const TensorView& norm = (*m)->weights().layers[0].attn_norm;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(norm.data) % 4, 0u);
  EXPECT_EQ(norm.dtype, DType::kF32);
  EXPECT_EQ(static_cast<const float*>(norm.data)[3], Pattern(16, 1)[3]);
  const TensorView& q = (*m)->weights().layers[0].wq;  // F16, copied to F32
  EXPECT_EQ(q.dtype, DType::kF32);
  EXPECT_EQ(static_cast<const float*>(q.data)[5], Pattern(256, 2)[5]);
}

TEST(HfModelTest, LlamaErrors) {
  ExpectError(WriteLlamaDir(LlamaTensors("model.layers.1.mlp.up_proj.weight")),
              StatusCode::kNotFound, "'model.layers.1.mlp.up_proj.weight'");
  ExpectError(WriteLlamaDir(LlamaTensors("lm_head.weight")), StatusCode::kNotFound,
              "lm_head.weight");
  auto bad_shape = LlamaTensors();
  bad_shape[2].shape = {8, 32};  // layers.0 q_proj: same bytes, wrong shape
  ExpectError(WriteLlamaDir(bad_shape), StatusCode::kCorrupt, "q_proj.weight' has shape [8, 32]");

  const auto no_config = FreshDir("_nc");
  WriteFile(no_config / "model.safetensors", SafetensorsBytes(LlamaTensors()));
  ExpectError(no_config, StatusCode::kNotFound, "config.json");
  const auto no_weights = FreshDir("_nw");
  WriteFile(no_weights / "config.json", kLlamaConfig);
  ExpectError(no_weights, StatusCode::kNotFound, "model.safetensors");
  const auto missing_shard = FreshDir("_ms");
  WriteFile(missing_shard / "config.json", kLlamaConfig);
  WriteFile(missing_shard / "model.safetensors.index.json",
            R"({"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}})");
  ExpectError(missing_shard, StatusCode::kNotFound, "model-00002-of-00002.safetensors");
  ExpectError("/nonexistent/strata/model", StatusCode::kNotFound, "/nonexistent/strata/model");
}

TEST(HfModelTest, ShardedLlamaWithTemplateList) {
  const auto dir = FreshDir();
  WriteFile(dir / "config.json", kLlamaConfig);
  auto all = LlamaTensors();
  const size_t half = all.size() / 2;
  WriteFile(dir / "a.safetensors", SafetensorsBytes({all.begin(), all.begin() + half}));
  WriteFile(dir / "b.safetensors", SafetensorsBytes({all.begin() + half, all.end()}));
  nlohmann::json index = {{"weight_map", nlohmann::json::object()}};
  for (size_t i = 0; i < all.size(); ++i) {
    index["weight_map"][all[i].name] = i < half ? "a.safetensors" : "b.safetensors";
  }
  WriteFile(dir / "model.safetensors.index.json", index.dump());
  WriteFile(dir / "tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                  {"name": "default", "template": "D"}]})");
  auto m = LoadModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->chat_template(), "D");
  EXPECT_TRUE((*m)->tokenizer_json_path().empty());
  EXPECT_TRUE((*m)->weights().lm_head.present());
}

TEST(HfModelTest, LlamaWithBiases) {
  nlohmann::json config = nlohmann::json::parse(kLlamaConfig);
  config["attention_bias"] = true;
  config["mlp_bias"] = true;
  auto tensors = LlamaTensors();
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (auto [name, n] : {std::pair<const char*, int64_t>{"self_attn.q_proj", 16},
                           {"self_attn.k_proj", 8},
                           {"self_attn.v_proj", 8},
                           {"self_attn.o_proj", 16},
                           {"mlp.gate_proj", 24},
                           {"mlp.up_proj", 24},
                           {"mlp.down_proj", 16}}) {
      Add(&tensors, p + name + ".bias", {n}, "F32");
    }
  }
  const auto dir = WriteLlamaDir(tensors);
  WriteFile(dir / "config.json", config.dump());
  auto m = LoadModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const LayerWeights& l = (*m)->weights().layers[1];
  EXPECT_EQ(l.bk.shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(l.bo.shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(l.b_gate.shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(l.b_up.shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(l.b_down.shape, (std::vector<int64_t>{16}));
  std::erase_if(tensors, [](const SafetensorsEntry& e) {
    return e.name == "model.layers.1.mlp.gate_proj.bias";
  });
  WriteFile(dir / "model.safetensors", SafetensorsBytes(tensors));
  ExpectError(dir, StatusCode::kNotFound, "'model.layers.1.mlp.gate_proj.bias'");
}

// The transformers-built parity fixtures (scripts/make_fixtures.py) load as they are.
TEST(HfModelTest, ParityFixtures) {
  const std::filesystem::path root =
      std::filesystem::path(STRATA_SOURCE_DIR) / "tests/data/fixtures";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "no fixtures under " << root;
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (!std::filesystem::exists(entry.path() / "config.json")) continue;
    auto m = LoadModel(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const ModelConfig& c = (*m)->config();
    const LayerWeights& l = (*m)->weights().layers.back();
    EXPECT_EQ(l.bq.present(), c.attention_bias) << entry.path();
    EXPECT_EQ(l.b_down.present(), c.mlp_bias) << entry.path();
    EXPECT_FALSE((*m)->tokenizer_json_path().empty()) << entry.path();
    ++loaded;
  }
  EXPECT_GT(loaded, 0);
}

constexpr char kOptConfig[] = R"({"model_type": "opt", "vocab_size": 32, "hidden_size": 16,
  "ffn_dim": 24, "num_hidden_layers": 1, "num_attention_heads": 2,
  "max_position_embeddings": 10, "do_layer_norm_before": true, "word_embed_proj_dim": 16,
  "activation_function": "relu"})";

TEST(HfModelTest, OptWithoutModelPrefix) {
  std::vector<SafetensorsEntry> t;
  Add(&t, "decoder.embed_tokens.weight", {32, 16}, "F16");
  Add(&t, "decoder.embed_positions.weight", {12, 16}, "F16");
  const std::string p = "decoder.layers.0.";
  for (const char* n : {"self_attn_layer_norm", "final_layer_norm"}) {
    Add(&t, p + n + ".weight", {16}, "F32");
    Add(&t, p + n + ".bias", {16}, "F32");
  }
  for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
    Add(&t, p + "self_attn." + n + ".weight", {16, 16}, "F16");
    Add(&t, p + "self_attn." + n + ".bias", {16}, "F16");
  }
  Add(&t, p + "fc1.weight", {24, 16}, "F16");
  Add(&t, p + "fc1.bias", {24}, "F16");
  Add(&t, p + "fc2.weight", {16, 24}, "F16");
  Add(&t, p + "fc2.bias", {16}, "F16");
  Add(&t, "decoder.final_layer_norm.weight", {16}, "F32");
  Add(&t, "decoder.final_layer_norm.bias", {16}, "F32");
  const auto dir = FreshDir();
  WriteFile(dir / "config.json", kOptConfig);
  WriteFile(dir / "model.safetensors", SafetensorsBytes(t));
  auto m = LoadModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.arch, Architecture::kOpt);
  EXPECT_EQ(c.position_offset, 2);
  const ModelWeights& w = (*m)->weights();
  EXPECT_EQ(w.position_embedding.shape, (std::vector<int64_t>{12, 16}));
  EXPECT_EQ(w.lm_head.data, w.token_embedding.data);
  EXPECT_TRUE(w.final_norm_bias.present());
  const LayerWeights& l = w.layers[0];
  EXPECT_TRUE(l.bo.present());
  EXPECT_TRUE(l.mlp_norm_bias.present());
  EXPECT_FALSE(l.w_gate.present());
  EXPECT_EQ(l.w_up.shape, (std::vector<int64_t>{24, 16}));
  EXPECT_EQ(l.b_up.shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(l.w_down.shape, (std::vector<int64_t>{16, 24}));
  EXPECT_EQ(l.b_down.shape, (std::vector<int64_t>{16}));

  auto no_bias = t;
  std::erase_if(no_bias, [](const SafetensorsEntry& e) { return e.name.ends_with("fc2.bias"); });
  WriteFile(dir / "model.safetensors", SafetensorsBytes(no_bias));
  ExpectError(dir, StatusCode::kNotFound, "'model.decoder.layers.0.fc2.bias'");
}

}  // namespace
}  // namespace strata
