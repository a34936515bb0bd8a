#include "src/model/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

using nlohmann::json;

// SmolLM2-135M-Instruct's config.json.
json SmolLm2() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
    "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
    "max_position_embeddings": 8192, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
    "pad_token_id": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "rope_theta": 100000, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "vocab_size": 49152})");
}

// facebook/opt-125m's config.json.
json Opt125m() {
  return json::parse(R"({
    "activation_dropout": 0.0, "activation_function": "relu", "architectures": ["OPTForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 2, "do_layer_norm_before": true, "dropout": 0.1,
    "eos_token_id": 2, "ffn_dim": 3072, "hidden_size": 768, "init_std": 0.02, "layerdrop": 0.0,
    "max_position_embeddings": 2048, "model_type": "opt", "num_attention_heads": 12,
    "num_hidden_layers": 12, "pad_token_id": 1, "torch_dtype": "float16",
    "use_cache": true, "vocab_size": 50272, "word_embed_proj_dim": 768})");
}

void ExpectError(const json& config, StatusCode code, const std::string& needle) {
  auto c = ParseHfConfig(config, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), code) << c.status().ToString();
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().ToString();
}

TEST(HfConfigTest, Llama) {
  auto c = ParseHfConfig(SmolLm2(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kLlama);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->norm, NormKind::kRmsNorm);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_EQ(c->rope_theta, 100000.0f);
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kNone);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->gated_mlp);
  EXPECT_TRUE(c->use_rope);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
  EXPECT_EQ(c->pad_token_id, 2);
  EXPECT_EQ(c->Summary(),
            "llama: 30 layers, hidden 576, heads 9/3, head_dim 64, ffn 1536, vocab 49152, "
            "context 8192, tied embeddings");
}

TEST(HfConfigTest, LlamaDefaultsAndScaling) {
  json j = SmolLm2();
  j.erase("num_key_value_heads");
  j.erase("tie_word_embeddings");
  j["head_dim"] = 32;
  j["eos_token_id"] = {2, 0, 5};
  j["pad_token_id"] = nullptr;
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  auto c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_kv_heads, 9);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_id, 2);
  EXPECT_EQ(c->pad_token_id, -1);
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kLlama3);
  EXPECT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 2.0f);

  j["rope_scaling"] = {{"rope_type", "default"}};
  j["mlp_bias"] = true;
  j["attention_bias"] = true;
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kNone);
  EXPECT_TRUE(c->mlp_bias);
  EXPECT_TRUE(c->attention_bias);
}

TEST(HfConfigTest, Transformers5RopeParameters) {
  json j = SmolLm2();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}};
  auto c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kNone);
  j["rope_parameters"] = {{"rope_theta", 500000.0},  {"rope_type", "llama3"},
                          {"factor", 32.0},          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kLlama3);
  EXPECT_EQ(c->rope_scaling.factor, 32.0f);
  j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "longrope"}, {"factor", 4.0}};
  ExpectError(j, StatusCode::kUnsupported, "'longrope'");
}

// YaRN as transformers reads it: attention_factor given, or from factor (0.1 ln factor + 1), or
// from mscale and mscale_all_dim; beta_fast / beta_slow default to 32 / 1, also when 0.
TEST(HfConfigTest, Yarn) {
  json j = SmolLm2();
  j["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  Result<ModelConfig> c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.kind, RopeScalingKind::kYarn);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_FLOAT_EQ(c->rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1);
  EXPECT_EQ(c->rope_scaling.beta_fast, 32.0f);
  EXPECT_EQ(c->rope_scaling.beta_slow, 1.0f);
  EXPECT_TRUE(c->rope_scaling.truncate);
  EXPECT_FLOAT_EQ(c->AttentionScale(),
                  (0.1f * std::log(4.0f) + 1) * (0.1f * std::log(4.0f) + 1) / 8);
  EXPECT_EQ(c->max_position_embeddings, 4 * 32768);  // the native 8192 reaches factor × original

  j["rope_scaling"]["mscale"] = 0.707;
  j["rope_scaling"]["mscale_all_dim"] = 1.0;
  j["rope_scaling"]["beta_fast"] = 0;
  j["rope_scaling"]["beta_slow"] = 2.0;
  j["rope_scaling"]["truncate"] = false;
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rope_scaling.attention_factor,
                  (0.1 * 0.707 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1));
  EXPECT_EQ(c->rope_scaling.beta_fast, 32.0f);
  EXPECT_EQ(c->rope_scaling.beta_slow, 2.0f);
  EXPECT_FALSE(c->rope_scaling.truncate);
  j["rope_scaling"]["attention_factor"] = 1.5;
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rope_scaling.attention_factor, 1.5f);

  j["rope_scaling"]["original_max_position_embeddings"] = 1024;  // 4 × 1024 < 8192: kept
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->max_position_embeddings, 8192);
  j["model_type"] = "mistral";
  j["sliding_window"] = 2048;  // the window still caps the scaled context
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->max_position_embeddings, 2048);

  j["rope_scaling"].erase("original_max_position_embeddings");
  ExpectError(j, StatusCode::kCorrupt, "original_max_position_embeddings");
}

TEST(HfConfigTest, LlamaUnsupported) {
  json j = SmolLm2();
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  ExpectError(j, StatusCode::kUnsupported, "'dynamic'");
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  ExpectError(j, StatusCode::kUnsupported, "'longrope'");
  // Phi-3's 128k configs: LongRoPE without a factor is unsupported, not malformed.
  j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0}}, {"short_factor", {1.0}}};
  ExpectError(j, StatusCode::kUnsupported, "'longrope'");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  ExpectError(j, StatusCode::kCorrupt, "low_freq_factor");
  j = SmolLm2();
  j["hidden_act"] = "gelu";
  ExpectError(j, StatusCode::kUnsupported, "hidden_act");
  j = SmolLm2();
  j["model_type"] = "gemma";
  ExpectError(j, StatusCode::kUnsupported, "'gemma'");
  j = SmolLm2();  // Phi-4-mini
  j["model_type"] = "phi3";
  j["partial_rotary_factor"] = 0.75;
  ExpectError(j, StatusCode::kUnsupported, "partial_rotary_factor");
  j.erase("partial_rotary_factor");
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
  ExpectError(j, StatusCode::kUnsupported, "partial_rotary_factor");
}

// The context of a config with sliding-window layers: the window, where those layers attend as
// strata does (full attention) — Mistral's sliding_window, Qwen's layers from max_window_layers on
// when use_sliding_window is set, or as layer_types lists them.
int ContextOf(const json& j) {
  Result<ModelConfig> c = ParseHfConfig(j, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c->max_position_embeddings : -1;
}

TEST(HfConfigTest, SlidingWindowCapsTheContext) {
  json j = SmolLm2();  // context 8192
  j["model_type"] = "mistral";
  j["sliding_window"] = 4096;
  EXPECT_EQ(ContextOf(j), 4096);
  j["sliding_window"] = 16384;
  EXPECT_EQ(ContextOf(j), 8192);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(ContextOf(j), 8192);
  j["sliding_window"] = 0;
  ExpectError(j, StatusCode::kCorrupt, "sliding_window");
  j["model_type"] = "phi3";  // Phi-3-mini-4k: 2047 of 4096
  j["sliding_window"] = 2047;
  EXPECT_EQ(ContextOf(j), 2047);
  j["sliding_window"] = nullptr;  // Phi-4
  EXPECT_EQ(ContextOf(j), 8192);

  j = SmolLm2();  // 30 layers
  j["model_type"] = "qwen2";
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 21;
  j["use_sliding_window"] = false;
  EXPECT_EQ(ContextOf(j), 8192);
  j["use_sliding_window"] = true;
  EXPECT_EQ(ContextOf(j), 4096);
  j["max_window_layers"] = 30;  // every layer attends to the whole context
  EXPECT_EQ(ContextOf(j), 8192);
  j["layer_types"] = json::array();
  for (int i = 0; i < 30; ++i) {
    j["layer_types"].push_back(i < 29 ? "full_attention" : "sliding_attention");
  }
  EXPECT_EQ(ContextOf(j), 4096);
  j["layer_types"][29] = "full_attention";
  EXPECT_EQ(ContextOf(j), 8192);
  j["model_type"] = "qwen3";
  j["layer_types"][0] = "sliding_attention";
  EXPECT_EQ(ContextOf(j), 4096);
  j["sliding_window"] = nullptr;
  ExpectError(j, StatusCode::kCorrupt, "sliding_window");
}

// Qwen2: Llama's layout with q/k/v biases and none on o (its config has no attention_bias key);
// Qwen3: Llama's with a per-head q/k RMSNorm.
TEST(HfConfigTest, Qwen2AndQwen3) {
  json j = SmolLm2();
  j["model_type"] = "qwen2";
  j["rope_theta"] = 1000000.0;
  j["use_sliding_window"] = false;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 21;
  Result<ModelConfig> c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->attention_output_bias);
  EXPECT_FALSE(c->mlp_bias);
  EXPECT_EQ(c->rope_theta, 1e6f);

  // Qwen3: Llama's layout (biases only with attention_bias, o's included) and a q/k norm.
  j["model_type"] = "qwen3";
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->attention_output_bias);

  // A Llama with attention_bias keeps the o projection's bias.
  j = SmolLm2();
  j["attention_bias"] = true;
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->attention_output_bias);
  EXPECT_FALSE(c->qk_norm);
}

TEST(HfConfigTest, Malformed) {
  json j = SmolLm2();
  j.erase("hidden_size");
  ExpectError(j, StatusCode::kCorrupt, "'hidden_size'");
  j = SmolLm2();
  j["num_hidden_layers"] = "30";
  ExpectError(j, StatusCode::kCorrupt, "'num_hidden_layers'");
  j = SmolLm2();
  j["num_key_value_heads"] = 4;
  ExpectError(j, StatusCode::kInvalidArgument, "num_kv_heads");
  j = SmolLm2();
  j["vocab_size"] = 1e12;
  ExpectError(j, StatusCode::kCorrupt, "'vocab_size'");
  j = SmolLm2();
  j["hidden_size"] = int64_t{1} << 40;
  ExpectError(j, StatusCode::kOutOfRange, "'hidden_size'");
  ExpectError(json::array(), StatusCode::kCorrupt, "not a JSON object");
  ExpectError(json::object(), StatusCode::kCorrupt, "model_type");
  auto missing = ReadHfConfig("/nonexistent/strata/config.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(HfConfigTest, Opt) {
  auto c = ParseHfConfig(Opt125m(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kOpt);
  EXPECT_EQ(c->num_layers, 12);
  EXPECT_EQ(c->hidden_size, 768);
  EXPECT_EQ(c->num_heads, 12);
  EXPECT_EQ(c->num_kv_heads, 12);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_EQ(c->norm, NormKind::kLayerNorm);
  EXPECT_EQ(c->norm_eps, 1e-5f);
  EXPECT_EQ(c->activation, Activation::kRelu);
  EXPECT_FALSE(c->gated_mlp);
  EXPECT_FALSE(c->use_rope);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->attention_output_bias);
  EXPECT_TRUE(c->mlp_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->position_offset, 2);
  EXPECT_EQ(c->bos_token_id, 2);
  EXPECT_EQ(c->pad_token_id, 1);

  json j = Opt125m();
  j["enable_bias"] = false;
  j["activation_function"] = "gelu";
  c = ParseHfConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->mlp_bias);
  EXPECT_EQ(c->activation, Activation::kGelu);
}

TEST(HfConfigTest, OptUnsupported) {
  json j = Opt125m();  // opt-350m: post-LayerNorm and a 512-wide embedding projection
  j["hidden_size"] = 1024;
  j["word_embed_proj_dim"] = 512;
  j["do_layer_norm_before"] = false;
  ExpectError(j, StatusCode::kUnsupported, "OPT-350m style post-LayerNorm/projection");
  j = Opt125m();
  j["activation_function"] = "silu";
  ExpectError(j, StatusCode::kUnsupported, "activation_function");
  j = Opt125m();
  j["num_attention_heads"] = 7;
  ExpectError(j, StatusCode::kInvalidArgument, "hidden_size");
}

TEST(ModelConfigTest, Validate) {
  ModelConfig c = *ParseHfConfig(SmolLm2(), "config.json");
  EXPECT_TRUE(c.Validate().ok());
  ModelConfig odd = c;
  odd.head_dim = 63;
  EXPECT_EQ(odd.Validate().code(), StatusCode::kInvalidArgument);
  ModelConfig eos = c;
  eos.eos_token_id = c.vocab_size;
  EXPECT_EQ(eos.Validate().code(), StatusCode::kInvalidArgument);
  ModelConfig zero = c;
  zero.num_layers = 0;
  EXPECT_EQ(zero.Validate().code(), StatusCode::kInvalidArgument);
  ModelConfig scaling = c;
  scaling.rope_scaling.kind = RopeScalingKind::kLlama3;
  scaling.rope_scaling.high_freq_factor = 0.5f;
  EXPECT_EQ(scaling.Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
