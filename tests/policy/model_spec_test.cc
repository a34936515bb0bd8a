#include "policy/model_spec.h"

#include <gtest/gtest.h>

#include "policy/weight_layout.h"

namespace strata {
namespace {

ModelSpec Preset(const std::string& name) {
  Result<std::string> path = ResolveConfigFile("models", name);
  EXPECT_TRUE(path.ok()) << path.status().ToString();
  Result<ModelSpec> spec = LoadModelSpecYaml(*path);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return *spec;
}

int64_t Parameters(const ModelSpec& m) {
  int64_t n = 0;
  for (const WeightLayer& layer : BuildWeightLayers(m)) {
    for (const WeightTensor& t : layer.tensors) n += layer.count * t.rows * t.cols;
  }
  return n;
}

TEST(ModelSpecTest, EveryPresetLoads) {
  const std::vector<std::string> presets = ListConfigPresets("models");
  for (const char* name : {"opt-6.7b", "opt-30b", "opt-66b", "opt-175b", "llama-2-7b",
                           "llama-2-70b", "llama-3-8b", "llama-3-70b"}) {
    EXPECT_NE(std::find(presets.begin(), presets.end(), name), presets.end()) << name;
    EXPECT_EQ(Preset(name).name, name);
  }
}

TEST(ModelSpecTest, PublicShapes) {
  const ModelSpec opt = Preset("opt-175b");
  EXPECT_EQ(opt.hidden_size, 12288);
  EXPECT_EQ(opt.num_layers, 96);
  EXPECT_EQ(opt.num_heads, 96);
  EXPECT_EQ(opt.intermediate_size, 49152);
  EXPECT_EQ(opt.vocab_size, 50272);
  EXPECT_EQ(opt.max_position_embeddings, 2048);
  const ModelSpec llama = Preset("llama-3-70b");
  EXPECT_EQ(llama.num_kv_heads, 8);
  EXPECT_EQ(llama.vocab_size, 128256);
  EXPECT_TRUE(llama.gated_mlp);
  // Parameter counts as published (the model cards), within 1%.
  const std::pair<const char*, double> counts[] = {
      {"opt-6.7b", 6.66e9},    {"opt-30b", 29.97e9},     {"opt-66b", 65.7e9},
      {"opt-175b", 174.6e9},   {"llama-2-7b", 6.74e9},   {"llama-2-70b", 68.98e9},
      {"llama-3-8b", 8.03e9},  {"llama-3-70b", 70.55e9}, {"tinyllama-1.1b", 1.100e9},
      {"qwen2.5-72b", 72.7e9}, {"qwen3-32b", 32.8e9},    {"phi-4", 14.7e9}};
  for (const auto& [name, published] : counts) {
    EXPECT_NEAR(Parameters(Preset(name)) / published, 1.0, 0.01) << name;
  }
}

TEST(ModelSpecTest, YamlRoundTripAndErrors) {
  const ModelSpec spec = Preset("llama-2-7b");
  Result<ModelSpec> back = ParseModelSpecYaml(ModelSpecToYaml(spec), "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ModelSpecToYaml(*back), ModelSpecToYaml(spec));

  std::string bad = ModelSpecToYaml(spec);
  bad.replace(bad.find("num_kv_heads: 32"), 16, "num_kv_heads: 5");
  Result<ModelSpec> r = ParseModelSpecYaml(bad, "m.yaml");
  EXPECT_NE(r.status().message().find("m.yaml: num_heads (32) must be a multiple of "
                                      "num_kv_heads (5)"),
            std::string::npos);
  r = ParseModelSpecYaml("name: x\nnum_layers: 0\n", "m.yaml");
  EXPECT_NE(r.status().message().find("'num_layers' must be at least 1"), std::string::npos);
}

TEST(ModelSpecTest, ResolvesNamesAndPaths) {
  Result<std::string> by_name = ResolveConfigFile("models", "opt-30b");
  ASSERT_TRUE(by_name.ok());
  EXPECT_TRUE(ResolveConfigFile("models", *by_name).ok());
  Result<std::string> missing = ResolveConfigFile("models", "opt-999b");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama-3-8b"), std::string::npos);
  EXPECT_TRUE(ResolveConfigFile("hardware", "t4-flexgen").ok());
}

}  // namespace
}  // namespace strata
