// Placement never changes the math (docs/DESIGN.md, rule 3): greedy tokens of the offloading
// engine equal Generator's — which parity_test.cc and default_model_test.cc hold to Hugging Face
// transformers — for every policy: all on the GPU, all on the CPU, all on disk, mixed splits of
// weights, cache and activations, many gpu batch size x micro-batch shapes, CPU attention on and
// off, with lanes jittered so that they interleave differently on every run. Also holds each
// run's peak bytes per tier to the plan's figures (rule 2).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/backend/backend.h"
#include "src/model/model.h"
#include "src/runtime/generator.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"

namespace strata {
namespace {

struct Policy {
  const char* name;
  std::vector<int> percent;  // FlexGen's WG WC CG CC AG AC
  int gbs, nb;
  bool cpu_attention;
};

const Policy kPolicies[] = {
    {"all_gpu", {100, 0, 100, 0, 100, 0}, 5, 1, false},
    {"all_cpu", {0, 100, 0, 100, 0, 100}, 2, 2, false},
    {"all_disk", {0, 0, 0, 0, 0, 0}, 1, 3, false},
    {"all_cpu_cpu_attention", {0, 100, 0, 100, 0, 100}, 2, 3, true},
    {"all_disk_cpu_attention", {0, 0, 0, 0, 0, 0}, 4, 2, true},
    {"mixed", {30, 40, 20, 50, 40, 30}, 2, 3, false},
    {"mixed_cpu_attention", {30, 40, 20, 50, 40, 30}, 2, 3, true},
    {"odd_splits", {55, 25, 33, 33, 10, 60}, 3, 2, false},
    {"odd_splits_cpu_attention", {55, 25, 33, 33, 10, 60}, 3, 2, true},
    {"flexgen_30b", {20, 80, 0, 100, 0, 100}, 2, 2, true},
    {"flexgen_175b", {0, 50, 0, 0, 0, 100}, 1, 5, true},
    {"one_per_micro_batch", {50, 0, 50, 0, 50, 0}, 1, 5, false},
    {"one_micro_batch", {10, 10, 10, 10, 10, 10}, 5, 1, false},
};

std::vector<GenerationRequest> Requests(const nlohmann::json& expected, int max_new) {
  std::vector<GenerationRequest> block;
  for (const auto& ids : expected["input_ids"]) {
    GenerationRequest r;
    r.prompt = ids.get<std::vector<int32_t>>();
    r.max_new_tokens = max_new;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    block.push_back(r);
  }
  return block;
}

// Runs `block` under every policy, compares the tokens with Generator's and returns each run's
// metrics. `jitter_us` shakes the lanes.
std::vector<ExecutorMetrics> CheckPolicies(const Model& model, const Tokenizer& tokenizer,
                                           const std::vector<GenerationRequest>& block,
                                           const std::vector<Policy>& policies, int jitter_us) {
  std::vector<ExecutorMetrics> metrics;
  auto backend = MakeCpuBackend();
  Transformer transformer(model, *backend);
  const std::vector<int32_t> eog = EndOfGenerationIds(tokenizer, model.config());
  Generator generator(transformer, tokenizer, eog);
  const std::vector<GenerationResult> want = generator.Generate(block);
  for (const Policy& policy : policies) {
    SCOPED_TRACE(policy.name);
    OffloadOptions o;
    Result<Plan> plan = PlanFromFlexGenPercent(policy.percent, policy.gbs, policy.nb);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (!plan.ok()) continue;
    o.plan = *plan;
    o.plan.cpu_attention = policy.cpu_attention;
    o.tiers.offload_dir = ::testing::TempDir();
    o.executor.jitter_us = jitter_us;
    o.executor.jitter_seed = static_cast<uint32_t>(jitter_us);
    OffloadGenerator offload(model, *backend, tokenizer, eog, o);
    Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) continue;
    EXPECT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size() && i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].tokens, want[i].tokens) << "request " << i;
      EXPECT_EQ((*got)[i].text, want[i].text) << "request " << i;
    }
    metrics.push_back(offload.metrics());
  }
  return metrics;
}

std::vector<GenerationRequest> FixtureBlock(const std::string& name, int max_new,
                                            std::unique_ptr<Model>* model,
                                            std::unique_ptr<Tokenizer>* tokenizer,
                                            nlohmann::json* expected) {
  const std::string dir = std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/" + name;
  std::ifstream in(dir + "/expected.json");
  *expected = nlohmann::json::parse(in);
  auto m = LoadModel(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  *model = std::move(*m);
  auto t = LoadTokenizerForModel(**model);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return {};
  *tokenizer = std::move(*t);
  return Requests(*expected, max_new);
}

class FixturePolicyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixturePolicyTest, TokensMatchGeneratorUnderEveryPolicy) {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json expected;
  const std::vector<GenerationRequest> block =
      FixtureBlock(GetParam(), 16, &model, &tokenizer, &expected);
  ASSERT_FALSE(block.empty());
  // Generator itself reproduces transformers' greedy tokens (parity_test.cc); check it here too,
  // so that "equal to Generator" means "right".
  {
    auto backend = MakeCpuBackend();
    Transformer transformer(*model, *backend);
    Generator generator(transformer, *tokenizer, {});
    const std::vector<GenerationResult> ref = generator.Generate(block);
    for (size_t p = 0; p < block.size(); ++p) {
      EXPECT_EQ(ref[p].tokens, expected["greedy"][p].get<std::vector<int32_t>>());
    }
  }
  CheckPolicies(*model, *tokenizer, block,
                std::vector<Policy>(std::begin(kPolicies), std::end(kPolicies)), 0);
  CheckPolicies(*model, *tokenizer, block, {kPolicies[5], kPolicies[6], kPolicies[10]}, 200);
}

// Every byte is accounted (docs/DESIGN.md, rule 2): what a run holds per tier — arenas, scratch
// file and the compute workspaces — stays within the plan's figures for the same model.
TEST_P(FixturePolicyTest, PeakBytesStayWithinThePlan) {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json expected;
  const std::vector<GenerationRequest> block =
      FixtureBlock(GetParam(), 4, &model, &tokenizer, &expected);
  ASSERT_FALSE(block.empty());
  const std::vector<Policy> policies(std::begin(kPolicies), std::end(kPolicies));
  const std::vector<ExecutorMetrics> metrics = CheckPolicies(*model, *tokenizer, block, policies, 0);
  for (size_t i = 0; i < metrics.size(); ++i) {
    const ExecutorMetrics& m = metrics[i];
    for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
      ASSERT_GE(m.planned_bytes.at(t), 0) << "the accounting cannot describe " << GetParam();
      EXPECT_LE(m.peak_bytes.at(t), m.planned_bytes.at(t))
          << policies[i].name << ", " << TierName(t) << "\n" << m.ToString();
    }
  }
}

// FlexGen's CPU-attention race (../shared/docs/ANCHORS.md): with the cache on disk and attention
// on the CPU, the next micro-batch's cache load must never land in the buffer the current one
// attends over. Each in-flight micro-batch has its own CPU-attention slot; the lanes are jittered
// over many seeds, and the executor checks every buffer's writer as each step starts.
TEST_P(FixturePolicyTest, CpuAttentionLoadsNeverOverwriteTheMicroBatchComputing) {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json expected;
  const std::vector<GenerationRequest> block =
      FixtureBlock(GetParam(), 6, &model, &tokenizer, &expected);
  ASSERT_FALSE(block.empty());
  const Policy race[] = {{"cache_on_disk", {0, 100, 0, 0, 0, 100}, 1, 5, true},
                         {"cache_split", {0, 100, 0, 40, 0, 100}, 2, 3, true}};
  for (int seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE("jitter seed " + std::to_string(seed));
    for (const Policy& p : race) CheckPolicies(*model, *tokenizer, block, {p}, 300 + 50 * seed);
  }
}

// Errors are values: an offload directory that does not exist fails the block with a message
// that names it, before anything runs.
TEST(OffloadErrorTest, MissingOffloadDirectoryIsAnError) {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json expected;
  const std::vector<GenerationRequest> block = FixtureBlock("opt", 2, &model, &tokenizer, &expected);
  ASSERT_FALSE(block.empty());
  auto backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
  o.tiers.offload_dir = ::testing::TempDir() + "/no/such/dir";
  OffloadGenerator offload(*model, *backend, *tokenizer, {}, o);
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << got.status().ToString();
  EXPECT_NE(got.status().message().find("no/such/dir"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixturePolicyTest,
                         ::testing::Values("opt", "llama-gqa", "llama3-rope", "llama-bias"));

std::string DefaultModelPath() {
  const char* cache = std::getenv("STRATA_CACHE");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string d = cache && *cache ? cache
                        : xdg && *xdg   ? std::string(xdg) + "/strata"
                                        : std::string(std::getenv("HOME")) + "/.cache/strata";
  return d + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The default model, kept small: three prompts, five tokens, three policies.
TEST(DefaultModelPolicyTest, TokensMatchGenerator) {
  const std::string path = DefaultModelPath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "default model not in the cache";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto tokenizer = LoadTokenizerForModel(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  std::vector<GenerationRequest> block;
  for (const char* text : {"The capital of France is", "def fibonacci(n):",
                           "Three things to pack for a hike:"}) {
    GenerationRequest r;
    r.prompt = (*tokenizer)->Encode(text, (*tokenizer)->add_bos_by_default());
    r.max_new_tokens = 5;
    r.sampling.temperature = 0.0f;
    block.push_back(r);
  }
  CheckPolicies(**model, **tokenizer, block,
                {{"all_disk", {0, 0, 0, 0, 0, 0}, 2, 2, false},
                 {"mixed_cpu_attention", {30, 40, 20, 50, 40, 30}, 1, 3, true},
                 {"flexgen_30b", {20, 80, 0, 100, 0, 100}, 3, 1, true}},
                0);
}

}  // namespace
}  // namespace strata
