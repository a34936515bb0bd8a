// Placement never changes the math (docs/DESIGN.md, rule 3): greedy tokens of the offloading
// engine equal those of the frozen reference engine (tests/reference/generator.h, which calls
// kernels/cpu directly, never a Backend op, and whose tokens are held here to Hugging Face
// transformers') for every policy: all on the GPU, all on the CPU, all on disk, mixed splits of
// weights, cache and activations, many gpu batch size x micro-batch shapes, CPU attention on and
// off, with lanes jittered so that they interleave differently on every run. Also holds each
// run's peak bytes per tier to the plan's figures (rule 2). With the 4-bit KV cache
// (compress_cache) the reference runs on the same 4-bit cache (its KvCache and its Transformer's
// compressed path, with the plan's key transform), and the same policies must give its tokens
// exactly. With 4-bit weights (compress_weight) the reference runs on the same
// quantized-then-expanded weights (Q4Weights::RoundTripped()).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "policy/memory_accounting.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/memory/model_spec_of.h"
#include "src/memory/placement.h"
#include "src/model/model.h"
#include "src/model/store_writer.h"
#include "src/model/synthetic_model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"
#include "src/runtime/q4_weights.h"
#include "src/tokenizer/silent_tokenizer.h"
#include "tests/io/forwarding_env.h"
#include "tests/model/model_files.h"
#include "tests/reference/generator.h"

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

// What the plan compresses; the reference runs with the same.
struct Compression {
  bool cache = false;
  CacheKeys keys = Plan{}.cache_keys;  // with `cache`
  // With `cache`: tokens kept exact.
  int sink = Plan{}.cache_sink, window = Plan{}.cache_window;
  bool weight = false;  // the reference's weights are Q4Weights::RoundTripped()
};

reference::KvCacheOptions CacheOptionsOf(Compression c) {
  reference::KvCacheOptions o;
  o.compress = c.cache;
  o.rotate_keys = c.cache && (c.keys == CacheKeys::kRotated || c.keys == CacheKeys::kSmoothed);
  o.smooth_keys = c.cache && c.keys == CacheKeys::kSmoothed;
  o.channel_keys = c.cache && c.keys == CacheKeys::kChannel;
  o.exact_sink = c.cache ? c.sink : 0;
  o.exact_window = c.cache ? c.window : 0;
  return o;
}

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

// The reference engine's results for `block` with `compression` (its weights
// Q4Weights::RoundTripped() when they are 4-bit): what every policy must reproduce.
std::vector<GenerationResult> ReferenceResults(const Model& model, const Tokenizer& tokenizer,
                                               const std::vector<GenerationRequest>& block,
                                               Compression compression = {}) {
  std::unique_ptr<Q4Weights> q4;
  if (compression.weight) q4 = std::make_unique<Q4Weights>(model);
  reference::Transformer transformer(model, q4 ? &q4->RoundTripped() : nullptr);
  reference::Generator generator(transformer, tokenizer,
                                 EndOfGenerationIds(tokenizer, model.config()));
  generator.set_cache_options(CacheOptionsOf(compression));
  return generator.Generate(block);
}

// The tokens of each result.
std::vector<std::vector<int32_t>> TokensOf(const std::vector<GenerationResult>& results) {
  std::vector<std::vector<int32_t>> tokens;
  for (const GenerationResult& r : results) tokens.push_back(r.tokens);
  return tokens;
}

// Runs `block` under every policy, compares the tokens with the reference's and returns each run's
// metrics. `jitter_us` shakes the lanes; `streams` says how the device's streams run their work.
std::vector<ExecutorMetrics> CheckPolicies(const Model& model, const Tokenizer& tokenizer,
                                           const std::vector<GenerationRequest>& block,
                                           const std::vector<Policy>& policies, int jitter_us,
                                           Compression compression = {},
                                           CpuStreamOptions streams = {}) {
  std::vector<ExecutorMetrics> metrics;
  auto backend = MakeCpuBackend({.streams = streams});
  auto cpu_backend = MakeCpuBackend({.streams = streams});
  const std::vector<int32_t> eog = EndOfGenerationIds(tokenizer, model.config());
  const std::vector<GenerationResult> want =
      ReferenceResults(model, tokenizer, block, compression);
  for (const Policy& policy : policies) {
    SCOPED_TRACE(policy.name);
    OffloadOptions o;
    Result<Plan> plan = PlanFromFlexGenPercent(policy.percent, policy.gbs, policy.nb);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (!plan.ok()) continue;
    o.plan = *plan;
    o.plan.cpu_attention = policy.cpu_attention;
    o.plan.compress_cache = compression.cache;
    o.plan.compress_weight = compression.weight;
    o.plan.cache_keys = compression.keys;
    o.plan.cache_sink = compression.sink;
    o.plan.cache_window = compression.window;
    o.tiers.offload_dir = ::testing::TempDir();
    o.executor.jitter_us = jitter_us;
    o.executor.jitter_seed = static_cast<uint32_t>(jitter_us);
    OffloadGenerator offload(model, *backend, *cpu_backend, tokenizer, eog, o);
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

// Each test runs on one fixture model (the parameter).
class FixturePolicyTest : public ::testing::TestWithParam<std::string> {
 protected:
  // The fixture's prompts as one block of `max_new` new tokens each (FixtureBlock), which loads
  // model_, tokenizer_ and expected_; empty on failure.
  std::vector<GenerationRequest> Block(int max_new) {
    return FixtureBlock(GetParam(), max_new, &model_, &tokenizer_, &expected_);
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  nlohmann::json expected_;
};

TEST_P(FixturePolicyTest, TokensMatchTheReferenceUnderEveryPolicy) {
  const std::vector<GenerationRequest> block = Block(16);
  ASSERT_FALSE(block.empty());
  // The reference itself reproduces transformers' greedy tokens; check it here, so that "equal
  // to the reference" means "right".
  const std::vector<GenerationResult> ref = ReferenceResults(*model_, *tokenizer_, block);
  for (size_t p = 0; p < block.size(); ++p) {
    EXPECT_EQ(ref[p].tokens, expected_["greedy"][p].get<std::vector<int32_t>>());
  }
  CheckPolicies(*model_, *tokenizer_, block,
                std::vector<Policy>(std::begin(kPolicies), std::end(kPolicies)), 0);
  CheckPolicies(*model_, *tokenizer_, block, {kPolicies[5], kPolicies[6], kPolicies[10]}, 200);
}

// The device's streams on worker threads that sleep a random while before each piece of work, so
// that only the events the executor records and waits for order the lanes' work: the tokens are
// still the reference's under every policy, with fp32 or 4-bit weights, and with the fp32 cache
// or the 4-bit one (by channel with exact tokens, the default; smoothed keys with exact tokens).
TEST_P(FixturePolicyTest, TokensMatchTheReferenceOnDelayedStreams) {
  const std::vector<GenerationRequest> block = Block(6);
  ASSERT_FALSE(block.empty());
  const std::vector<Policy> policies(std::begin(kPolicies), std::end(kPolicies));
  for (const Compression c :
       {Compression{}, Compression{.weight = true}, Compression{.cache = true},
        Compression{.cache = true, .keys = CacheKeys::kSmoothed, .sink = 1, .window = 4}}) {
    SCOPED_TRACE(std::string(c.weight ? "4-bit weights" : "fp32 weights") + ", " +
                 (c.cache ? std::string(CacheKeysName(c.keys)) + " 4-bit cache" : "fp32 cache"));
    CheckPolicies(*model_, *tokenizer_, block, policies, 0, c,
                  {.threaded = true, .max_delay_us = 100, .seed = 9});
  }
}

// And the events are what does it: with the compute steps' streams given none of their waits
// (each lane's thread still waits for the steps it needs to be given), the compute reads weights,
// cache rows and hidden states before they land, and the tokens go wrong.
TEST_P(FixturePolicyTest, ComputeStreamsWithoutTheirWaitsGoWrong) {
  const std::vector<GenerationRequest> block = Block(6);
  ASSERT_FALSE(block.empty());
  const std::vector<GenerationResult> want = ReferenceResults(*model_, *tokenizer_, block);
  auto backend = MakeCpuBackend({.streams = {.threaded = true, .max_delay_us = 2000, .seed = 4}});
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent(kPolicies[5].percent, kPolicies[5].gbs, kPolicies[5].nb);
  o.tiers.offload_dir = ::testing::TempDir();
  o.executor.skip_stream_waits = [](const Step& s) { return s.kind == StepKind::kCompute; };
  OffloadGenerator offload(*model_, *backend, *cpu_backend, *tokenizer_,
                           EndOfGenerationIds(*tokenizer_, model_->config()), o);
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want.size());
  EXPECT_NE(TokensOf(*got), TokensOf(want));
}

// The 4-bit KV cache under every policy: written quantized as the prefill and each decode step
// produce it, moved between tiers compressed, attended on its codes (on the CPU for delegated
// rows), for each way of storing keys: by channel (the default; a group of 32 tokens quantized
// when its last token is written, from the step's keys and the exact window) under every policy,
// with sequences long enough to complete groups; plain (FlexGen's groups), rotated and smoothed
// (fitted at the prefill, resident where the layers compute, queries scaled on the CPU too)
// under a few, without exact tokens. The reference on the same 4-bit cache is what they match;
// the references differ from each other and from the fp32 run, which shows the cache really is
// 4-bit and each key format really applied.
TEST_P(FixturePolicyTest, CompressedCacheTokensMatchTheReferenceUnderEveryPolicy) {
  const std::vector<GenerationRequest> block = Block(16);
  ASSERT_FALSE(block.empty());
  std::vector<std::vector<std::vector<int32_t>>> references;
  for (CacheKeys keys : {CacheKeys::kPlain, CacheKeys::kRotated, CacheKeys::kSmoothed}) {
    SCOPED_TRACE(std::string(CacheKeysName(keys)) + " keys");
    const Compression c{.cache = true, .keys = keys, .sink = 0, .window = 0};
    // Kept short: every tier, CPU attention over CPU and disk rows.
    CheckPolicies(*model_, *tokenizer_, block,
                  {kPolicies[0], kPolicies[4], kPolicies[6], kPolicies[10]}, 0, c);
    references.push_back(TokensOf(ReferenceResults(*model_, *tokenizer_, block, c)));
  }
  // The plain reference is 4-bit: its tokens are not the fp32 cache's (transformers' greedy).
  size_t differ = 0;
  for (size_t p = 0; p < block.size(); ++p) {
    differ += references[0][p] != expected_["greedy"][p].get<std::vector<int32_t>>();
  }
  EXPECT_GT(differ, 0u);
  EXPECT_NE(references[0], references[1]) << "rotation changed no token";
  EXPECT_NE(references[1], references[2]) << "smoothing changed no token";

  // Keys by channel need sequences past the exact window: 80 new tokens complete a group.
  SCOPED_TRACE("channel keys");
  const std::vector<GenerationRequest> long_block = Block(80);
  const Compression channel{.cache = true};
  ASSERT_EQ(channel.keys, CacheKeys::kChannel);
  CheckPolicies(*model_, *tokenizer_, long_block,
                std::vector<Policy>(std::begin(kPolicies), std::end(kPolicies)), 0, channel);
  CheckPolicies(*model_, *tokenizer_, long_block, {kPolicies[6], kPolicies[10]}, 200, channel);
  EXPECT_NE(TokensOf(ReferenceResults(*model_, *tokenizer_, long_block, channel)),
            TokensOf(ReferenceResults(*model_, *tokenizer_, long_block)))
      << "keys by channel changed no token";
}

// Exact tokens of the 4-bit cache (plan cache_sink and cache_window) under every policy: each
// sequence's first token and a ring of its 4 latest ones are kept in fp32 next to the smoothing,
// written by the prefill and each decode step and read by decode attention (on the CPU for
// delegated rows too). The reference on the same option is what they match; its tokens differ
// from those with only the first token exact, which shows the window's rows really are read, and
// a window as long as the sequences gives transformers' fp32 tokens.
TEST_P(FixturePolicyTest, ExactTokensOfTheCompressedCacheMatchTheReferenceUnderEveryPolicy) {
  const std::vector<GenerationRequest> block = Block(16);
  ASSERT_FALSE(block.empty());
  std::vector<std::vector<std::vector<int32_t>>> references;
  for (int window : {0, 4}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const Compression c{.cache = true, .keys = CacheKeys::kPlain, .sink = 1, .window = window};
    if (window > 0) {
      CheckPolicies(*model_, *tokenizer_, block,
                    std::vector<Policy>(std::begin(kPolicies), std::end(kPolicies)), 0, c);
      CheckPolicies(*model_, *tokenizer_, block, {kPolicies[6], kPolicies[10]}, 200, c);
      // Smoothed keys: the exact rows hold smoothed, rotated keys.
      CheckPolicies(*model_, *tokenizer_, block, {kPolicies[0], kPolicies[6], kPolicies[10]}, 0,
                    {.cache = true, .keys = CacheKeys::kSmoothed, .sink = 1, .window = window});
    }
    references.push_back(TokensOf(ReferenceResults(*model_, *tokenizer_, block, c)));
  }
  EXPECT_NE(references[0], references[1]) << "the exact window changed no token";
  // A window as long as the sequences keeps every token exact: transformers' fp32 greedy tokens.
  size_t longest = 0;
  for (const GenerationRequest& r : block) longest = std::max(longest, r.prompt.size());
  const std::vector<GenerationResult> all_exact = ReferenceResults(
      *model_, *tokenizer_, block,
      {.cache = true, .keys = CacheKeys::kSmoothed, .window = static_cast<int>(longest) + 16});
  for (size_t p = 0; p < block.size(); ++p) {
    EXPECT_EQ(all_exact[p].tokens, expected_["greedy"][p].get<std::vector<int32_t>>());
  }
}

// 4-bit weights (plan.compress_weight) under every policy, with the fp32 and the 4-bit cache:
// each tier's home holds its rows' codes and params, a weight slot is assembled from them as
// for raw weights, and compute expands each layer once per token step. The reference runs on
// the same quantize-then-expand weights (Q4Weights::RoundTripped()); its tokens differ from the
// fp32 weights' tokens, which shows the weights really are 4-bit. llama-gqa's down_proj (160
// input columns, not whole groups of 64) stays raw beside 4-bit tensors.
TEST_P(FixturePolicyTest, CompressedWeightTokensMatchTheReferenceUnderEveryPolicy) {
  const std::vector<GenerationRequest> block = Block(16);
  ASSERT_FALSE(block.empty());
  const std::vector<Policy> policies(std::begin(kPolicies), std::end(kPolicies));
  for (const bool cache : {false, true}) {
    SCOPED_TRACE(cache ? "4-bit cache" : "fp32 cache");
    const Compression c{.cache = cache, .weight = true};
    CheckPolicies(*model_, *tokenizer_, block, policies, 0, c);
    CheckPolicies(*model_, *tokenizer_, block, {kPolicies[5], kPolicies[6], kPolicies[10]}, 200, c);
  }
  const std::vector<GenerationResult> ref =
      ReferenceResults(*model_, *tokenizer_, block, {.weight = true});
  size_t differ = 0;
  for (size_t p = 0; p < block.size(); ++p) {
    differ += ref[p].tokens != expected_["greedy"][p].get<std::vector<int32_t>>();
  }
  EXPECT_GT(differ, 0u) << "4-bit weights changed no token";
}

// A layer's 4-bit weights are expanded once per token step, shared by all its micro-batches:
// the count is (2L + 2) scheduling layers x token steps, whatever num_gpu_batches, wherever the
// weights live. Every scheduling layer of the fixtures has a 4-bit matrix (hidden size 64).
TEST_P(FixturePolicyTest, FourBitWeightsAreExpandedOncePerLayerPerTokenStep) {
  const int max_new = 5;
  const std::vector<GenerationRequest> block = Block(max_new);
  ASSERT_FALSE(block.empty());
  const int n = static_cast<int>(block.size());
  const std::vector<Policy> policies = {
      {"all_gpu_nb1", {100, 0, 100, 0, 100, 0}, n, 1, false},
      {"all_gpu_nb_n", {100, 0, 100, 0, 100, 0}, 1, n, false},
      {"mixed_nb_n", {30, 40, 20, 50, 40, 30}, 1, n, true},
      {"all_disk_nb2", {0, 0, 0, 0, 0, 0}, (n + 1) / 2, 2, false}};
  const int64_t layers = 2 * int64_t{model_->config().num_layers} + 2;
  const std::vector<ExecutorMetrics> metrics =
      CheckPolicies(*model_, *tokenizer_, block, policies, 0, {.weight = true});
  ASSERT_EQ(metrics.size(), policies.size());
  for (size_t i = 0; i < metrics.size(); ++i) {
    SCOPED_TRACE(policies[i].name);
    EXPECT_EQ(metrics[i].blocks, 1);
    EXPECT_EQ(metrics[i].tokens, max_new);
    EXPECT_EQ(metrics[i].weight_expansions, layers * max_new);
  }
  const std::vector<ExecutorMetrics> fp32 =
      CheckPolicies(*model_, *tokenizer_, block, {policies[1]}, 0);
  ASSERT_EQ(fp32.size(), 1u);
  EXPECT_EQ(fp32[0].weight_expansions, 0);
}

// Every byte is accounted (docs/DESIGN.md, rule 2): what a run holds per tier — arenas, scratch
// file and the compute workspaces — stays within the plan's figures for the same model, and the
// KV cache homes are the accounting's figures byte for byte, fp32 or 4-bit.
TEST_P(FixturePolicyTest, PeakBytesStayWithinThePlan) {
  const std::vector<GenerationRequest> block = Block(4);
  ASSERT_FALSE(block.empty());
  const std::vector<Policy> policies(std::begin(kPolicies), std::end(kPolicies));
  for (const Compression c : {Compression{}, Compression{.cache = true},
                              Compression{.weight = true}, Compression{.cache = true, .weight = true}}) {
    SCOPED_TRACE(std::string(c.cache ? "4-bit cache" : "fp32 cache") +
                 (c.weight ? ", 4-bit weights" : ""));
    const std::vector<ExecutorMetrics> metrics =
        CheckPolicies(*model_, *tokenizer_, block, policies, 0, c);
    for (size_t i = 0; i < metrics.size(); ++i) {
      const ExecutorMetrics& m = metrics[i];
      for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
        ASSERT_GE(m.planned_bytes.at(t), 0) << "the accounting cannot describe " << GetParam();
        EXPECT_LE(m.peak_bytes.at(t), m.planned_bytes.at(t))
            << policies[i].name << ", " << TierName(t) << "\n" << m.ToString();
      }
    }
  }
}

// Blocks whose prompts grow a token at a time (`run` sorts blocks by prompt length) place the
// engine a few times, not once a block: each placement copies every weight home again. The
// tokens stay the reference's.
TEST_P(FixturePolicyTest, GrowingBlocksPlaceAFewTimesNotOnceABlock) {
  const std::vector<GenerationRequest> block = Block(3);
  ASSERT_FALSE(block.empty());
  std::vector<int32_t> ids;
  for (const GenerationRequest& r : block) ids.insert(ids.end(), r.prompt.begin(), r.prompt.end());
  ASSERT_GE(ids.size(), 17u);
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({50, 50, 100, 0, 100, 0}, 1, 1);
  o.tiers.offload_dir = ::testing::TempDir();
  OffloadGenerator offload(*model_, *backend, *cpu_backend, *tokenizer_,
                           EndOfGenerationIds(*tokenizer_, model_->config()), o);
  GenerationRequest r = block[0];
  for (size_t n = 2; n <= 17; ++n) {
    r.prompt.assign(ids.begin(), ids.begin() + static_cast<long>(n));
    Result<std::vector<GenerationResult>> got = offload.TryGenerate({r});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(TokensOf(*got), TokensOf(ReferenceResults(*model_, *tokenizer_, {r})))
        << n << " prompt tokens";
  }
  // Prompts 2, 3, 5, 9 and 17 tokens long outgrow the placement; one block at a time would be 16.
  EXPECT_GT(offload.placements(), 1);
  EXPECT_LE(offload.placements(), 5);
}

// FlexGen's CPU-attention race (../shared/docs/ANCHORS.md): with the cache on disk and attention
// on the CPU, the next micro-batch's cache load must never land in the buffer the current one
// attends over. Each in-flight micro-batch has its own CPU-attention slot; the lanes are jittered
// over many seeds, and the executor checks every buffer's writer as each step starts.
TEST_P(FixturePolicyTest, CpuAttentionLoadsNeverOverwriteTheMicroBatchComputing) {
  const std::vector<GenerationRequest> block = Block(6);
  ASSERT_FALSE(block.empty());
  const Policy race[] = {{"cache_on_disk", {0, 100, 0, 0, 0, 100}, 1, 5, true},
                         {"cache_split", {0, 100, 0, 40, 0, 100}, 2, 3, true}};
  for (int seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE("jitter seed " + std::to_string(seed));
    for (const Policy& p : race) {
      CheckPolicies(*model_, *tokenizer_, block, {p}, 300 + 50 * seed);
      CheckPolicies(*model_, *tokenizer_, block, {p}, 300 + 50 * seed, {.cache = true});
    }
  }
}

// CPU delegation runs on a lane of its own (FlexGen's CPU delegation): while micro-batch i's
// decode attention runs on the CPU, the compute lane gives the device other micro-batches' work.
// The CPU backend's stream sleeps before each piece of work, so that a CPU attention step takes a
// while; the trace then shows compute-lane spans of other micro-batches inside CPU-lane spans, and
// the tokens are still the reference's. A compute lane that waited for the CPU before going on
// (as the executor did when the CPU's part ran inline) shows none.
TEST_P(FixturePolicyTest, CpuAttentionRunsWhileTheComputeLaneGoesOn) {
  const std::vector<GenerationRequest> block = Block(4);
  ASSERT_FALSE(block.empty());
  const std::vector<GenerationResult> want = ReferenceResults(*model_, *tokenizer_, block);
  auto backend = MakeCpuBackend();
  auto cpu_backend =
      MakeCpuBackend({.streams = {.threaded = true, .max_delay_us = 300, .seed = 5}});
  for (const Policy& policy : {kPolicies[3], kPolicies[6]}) {
    SCOPED_TRACE(policy.name);
    OffloadOptions o;
    o.plan = *PlanFromFlexGenPercent(policy.percent, policy.gbs, policy.nb);
    o.plan.cpu_attention = true;
    o.tiers.offload_dir = ::testing::TempDir();
    o.keep_trace = true;
    OffloadGenerator offload(*model_, *backend, *cpu_backend, *tokenizer_,
                             EndOfGenerationIds(*tokenizer_, model_->config()), o);
    Result<BlockSchedule> schedule = offload.ScheduleFor(static_cast<int>(block.size()), 24, 4);
    ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
    ASSERT_TRUE(schedule->shape.cpu_attention_decode) << "CPU attention runs inline";
    Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(TokensOf(*got), TokensOf(want));
    EXPECT_GT(offload.metrics().lane_busy_s[static_cast<size_t>(Lane::kCpu)], 0);

    const std::string path = ::testing::TempDir() + "/cpu_lane_trace.json";
    ASSERT_TRUE(offload.WriteTrace(path).ok());
    std::ifstream in(path);
    const nlohmann::json trace = nlohmann::json::parse(in);
    struct Span {
      double start, end;
      std::string mb;
    };
    // The micro-batch a lane step's span names ("... mb2"), "" for none.
    const auto mb_of = [](const std::string& name) {
      const size_t at = name.rfind(" mb");
      return at == std::string::npos ? std::string() : name.substr(at + 3);
    };
    std::vector<Span> cpu, compute;
    for (const nlohmann::json& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      const int track = e["tid"].get<int>();
      const Span span{e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(),
                      mb_of(e["name"].get<std::string>())};
      if (track == static_cast<int>(Lane::kCpu)) cpu.push_back(span);
      if (track == static_cast<int>(Lane::kCompute)) compute.push_back(span);
    }
    ASSERT_FALSE(cpu.empty());
    int beside = 0;  // compute spans of another micro-batch that lie within a CPU attention span
    for (const Span& c : cpu) {
      for (const Span& g : compute) {
        beside += g.mb != c.mb && g.start >= c.start && g.end <= c.end;
      }
    }
    EXPECT_GT(beside, 0) << cpu.size() << " CPU attention steps, none beside other device work";
  }
}

// And the CPU lane waits for the device's copies by their events: with the CPU attention steps
// taking no host wait (their thread still waits until the copies were given), the CPU attends
// queries, keys and values that have not landed in host memory yet, and the tokens go wrong.
TEST_P(FixturePolicyTest, CpuAttentionWithoutItsHostWaitsGoesWrong) {
  const std::vector<GenerationRequest> block = Block(6);
  ASSERT_FALSE(block.empty());
  const std::vector<GenerationResult> want = ReferenceResults(*model_, *tokenizer_, block);
  auto backend = MakeCpuBackend({.streams = {.threaded = true, .max_delay_us = 2000, .seed = 4}});
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent(kPolicies[3].percent, kPolicies[3].gbs, kPolicies[3].nb);
  o.plan.cpu_attention = true;
  o.tiers.offload_dir = ::testing::TempDir();
  o.executor.skip_stream_waits = [](const Step& s) { return s.kind == StepKind::kCpuAttention; };
  OffloadGenerator offload(*model_, *backend, *cpu_backend, *tokenizer_,
                           EndOfGenerationIds(*tokenizer_, model_->config()), o);
  Result<BlockSchedule> schedule = offload.ScheduleFor(static_cast<int>(block.size()), 24, 6);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  ASSERT_TRUE(schedule->shape.cpu_attention_decode) << "CPU attention runs inline";
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want.size());
  EXPECT_NE(TokensOf(*got), TokensOf(want));
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
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({0, 0, 0, 0, 0, 0}, 2, 2);
  o.tiers.offload_dir = ::testing::TempDir() + "/no/such/dir";
  OffloadGenerator offload(*model, *backend, *cpu_backend, *tokenizer, {}, o);
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << got.status().ToString();
  EXPECT_NE(got.status().message().find("no/such/dir"), std::string::npos);
}

// A placement over the host memory the tiers may take is refused before anything is allocated
// (the offload directory, which does not exist, is never reached), with the plan's figures and
// what would fit (policy/fit_check.h); the same plan runs when the memory is there.
TEST(OffloadErrorTest, PlanOverTheHostMemoryIsRefusedBeforeAnythingIsAllocated) {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json expected;
  const std::vector<GenerationRequest> block =
      FixtureBlock("opt", 2, &model, &tokenizer, &expected);
  ASSERT_FALSE(block.empty());
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  OffloadOptions o;
  o.plan = *PlanFromFlexGenPercent({100, 0, 100, 0, 100, 0}, 2, 2);
  o.tiers.offload_dir = ::testing::TempDir() + "/no/such/dir";
  o.host_memory_bytes = 1000;
  OffloadGenerator refused(*model, *backend, *cpu_backend, *tokenizer, {}, o);
  Result<std::vector<GenerationResult>> got = refused.TryGenerate(block);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted) << got.status().ToString();
  const std::string& text = got.status().message();
  EXPECT_NE(text.find("host memory: the plan"), std::string::npos) << text;
  EXPECT_NE(text.find("1000 B is available"), std::string::npos) << text;
  EXPECT_TRUE(text.find("To fit") != std::string::npos ||
              text.find("Nothing fits") != std::string::npos)
      << text;

  o.host_memory_bytes = int64_t{1} << 40;
  o.tiers.offload_dir = ::testing::TempDir();
  OffloadGenerator runs(*model, *backend, *cpu_backend, *tokenizer, {}, o);
  EXPECT_TRUE(runs.TryGenerate(block).ok());
}

// Weights made on demand (`strata bench`'s synthetic presets) run on the offloading engine, which
// makes them straight into their homes and never reads their placeholder views, and give the
// tokens the reference gives on the same model made in memory, under policies over every tier,
// with raw and 4-bit weights (quantized one matrix at a time as they are made).
TEST(SyntheticWeightsTest, MadeOnDemandTheyGiveTheTokensOfTheInMemoryModel) {
  ModelConfig c;
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.max_position_embeddings = 64;
  auto held = MakeSyntheticModel(c, DType::kF16, 11, SyntheticWeights::kInMemory);
  auto made = MakeSyntheticModel(c, DType::kF16, 11, SyntheticWeights::kOnDemand);
  ASSERT_TRUE(held.ok() && made.ok());
  SilentTokenizer tokenizer(c.vocab_size);
  std::vector<GenerationRequest> block(4);
  for (size_t i = 0; i < block.size(); ++i) {
    for (int t = 0; t < 6 + static_cast<int>(i); ++t) {
      block[i].prompt.push_back(static_cast<int32_t>((37 * i + 11 * t) % c.vocab_size));
    }
    block[i].max_new_tokens = 5;
    block[i].sampling.temperature = 0.0f;
    block[i].ignore_eos = true;
  }
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  for (bool weight : {false, true}) {
    SCOPED_TRACE(weight ? "4-bit weights" : "raw weights");
    const std::vector<GenerationResult> want =
        ReferenceResults(**held, tokenizer, block, {.weight = weight});
    for (const Policy& policy : {kPolicies[0], kPolicies[2], kPolicies[6]}) {
      SCOPED_TRACE(policy.name);
      OffloadOptions o;
      o.plan = *PlanFromFlexGenPercent(policy.percent, policy.gbs, policy.nb);
      o.plan.cpu_attention = policy.cpu_attention;
      o.plan.compress_weight = weight;
      o.tiers.offload_dir = ::testing::TempDir();
      OffloadGenerator offload(**made, *backend, *cpu_backend, tokenizer, {}, o);
      Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(TokensOf(*got), TokensOf(want));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixturePolicyTest,
                         ::testing::Values("opt", "llama-gqa", "llama3-rope", "llama-bias", "qwen2",
                                           "qwen3", "qwen2-yarn", "phi3"));

// The default model, kept small: three prompts, five tokens, three policies, with the fp32 and
// the 4-bit cache (channel keys, the default; plain keys under one policy), and with 4-bit
// weights (fp32 and 4-bit cache); then 72 tokens under one policy, so that the default cache
// quantizes whole groups of channel keys.
TEST(DefaultModelPolicyTest, TokensMatchTheReference) {
  const std::string path = testing_files::DefaultModelPath().string();
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
  const std::vector<Policy> policies = {
      {"all_disk", {0, 0, 0, 0, 0, 0}, 2, 2, false},
      {"mixed_cpu_attention", {30, 40, 20, 50, 40, 30}, 1, 3, true},
      {"flexgen_30b", {20, 80, 0, 100, 0, 100}, 3, 1, true}};
  CheckPolicies(**model, **tokenizer, block, policies, 0);
  CheckPolicies(**model, **tokenizer, block, policies, 0, {.cache = true});  // channel keys
  CheckPolicies(**model, **tokenizer, block, {policies[1]}, 0,
                {.cache = true, .keys = CacheKeys::kPlain});
  std::vector<GenerationRequest> long_block = block;
  for (GenerationRequest& r : long_block) r.max_new_tokens = 72;
  CheckPolicies(**model, **tokenizer, long_block, {policies[1]}, 0, {.cache = true});
  SCOPED_TRACE("4-bit weights");
  CheckPolicies(**model, **tokenizer, block, policies, 0, {.weight = true});
  CheckPolicies(**model, **tokenizer, block, policies, 0, {.cache = true, .weight = true});
}

// A FileEnv that passes everything on and adds up what is preallocated: the scratch file's size.
class AllocationCounter final : public io_testing::ForwardingEnv {
 public:
  AllocationCounter(std::unique_ptr<FileEnv> base, std::atomic<uint64_t>* allocated)
      : ForwardingEnv(std::move(base)), allocated_(allocated) {}
  Status Allocate(DiskFile* file, uint64_t bytes) override {
    *allocated_ += bytes;
    return ForwardingEnv::Allocate(file, bytes);
  }

 private:
  std::atomic<uint64_t>* allocated_;
};

// Runs `block` on `model` under `plan` with the scratch file's allocations counted: checks the
// tokens against `want` and the disk peak against the plan's, and returns the scratch bytes.
uint64_t ScratchBytes(const Model& model, const Tokenizer& tokenizer, const Plan& plan,
                      const std::vector<GenerationRequest>& block,
                      const std::vector<GenerationResult>& want, int jitter_us) {
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  std::atomic<uint64_t> allocated{0};
  OffloadOptions o;
  o.plan = plan;
  o.tiers.offload_dir = ::testing::TempDir();
  o.tiers.wrap_file_env = [&](std::unique_ptr<FileEnv> env) -> std::unique_ptr<FileEnv> {
    return std::make_unique<AllocationCounter>(std::move(env), &allocated);
  };
  o.executor.jitter_us = jitter_us;
  OffloadGenerator offload(model, *backend, *cpu_backend, tokenizer,
                           EndOfGenerationIds(tokenizer, model.config()), o);
  Result<std::vector<GenerationResult>> got = offload.TryGenerate(block);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (!got.ok()) return 0;
  EXPECT_EQ(TokensOf(*got), TokensOf(want)) << model.source();
  const ExecutorMetrics& m = offload.metrics();
  EXPECT_LE(m.peak_bytes.at(Tier::kDisk), m.planned_bytes.at(Tier::kDisk));
  return allocated.load();
}

// A model loaded from a strata store (`strata convert`, raw tensors) reads its disk weights in
// place from tensors.bin: the scratch file is smaller by exactly the plan's disk weights (and
// not created at all when only weights live on disk), and the tokens are the reference's — on
// the store model and on the source it was converted from — under every plan, the all-GPU one
// too.
TEST(StoreWeightsTest, DiskWeightsAreReadFromTheStoreNotCopied) {
  for (const char* name : {"opt", "llama-gqa"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> source;
    std::unique_ptr<Tokenizer> tokenizer;
    nlohmann::json expected;
    const std::vector<GenerationRequest> block =
        FixtureBlock(name, 6, &source, &tokenizer, &expected);
    ASSERT_FALSE(block.empty());
    const std::string dir = ::testing::TempDir() + "/policy_store_" + name + "_" +
                            std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    ASSERT_TRUE(WriteStore(*source, dir).ok());
    auto stored = LoadModel(dir);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    const std::vector<int32_t> eog = EndOfGenerationIds(*tokenizer, source->config());
    reference::Transformer source_transformer(*source);
    const std::vector<GenerationResult> want =
        reference::Generator(source_transformer, *tokenizer, eog).Generate(block);
    for (size_t p = 0; p < block.size(); ++p) {
      std::vector<int32_t> greedy = expected["greedy"][p].get<std::vector<int32_t>>();
      greedy.resize(std::min(greedy.size(), want[p].tokens.size()));
      EXPECT_EQ(want[p].tokens, greedy);
    }
    reference::Transformer store_transformer(**stored);
    const std::vector<GenerationResult> want_store =
        reference::Generator(store_transformer, *tokenizer, eog).Generate(block);
    for (size_t p = 0; p < block.size(); ++p) EXPECT_EQ(want_store[p].tokens, want[p].tokens);

    const Policy policies[] = {{"all_gpu", {100, 0, 100, 0, 100, 0}, 2, 3, false},
                               {"weights_on_disk", {0, 0, 100, 0, 100, 0}, 2, 3, false},
                               {"all_disk", {0, 0, 0, 0, 0, 0}, 1, 3, false},
                               {"mixed", {30, 40, 20, 50, 40, 30}, 2, 3, true},
                               {"flexgen_175b", {0, 50, 0, 0, 0, 100}, 1, 5, true}};
    for (const Policy& policy : policies) {
      SCOPED_TRACE(policy.name);
      Result<Plan> plan = PlanFromFlexGenPercent(policy.percent, policy.gbs, policy.nb);
      ASSERT_TRUE(plan.ok());
      plan->cpu_attention = policy.cpu_attention;
      const uint64_t scratch[2] = {ScratchBytes(*source, *tokenizer, *plan, block, want, 50),
                                   ScratchBytes(**stored, *tokenizer, *plan, block, want, 50)};
      Result<ModelSpec> spec = ModelSpecOf(*source);
      ASSERT_TRUE(spec.ok());
      int prompt_len = 0;
      for (const GenerationRequest& r : block) {
        prompt_len = std::max(prompt_len, static_cast<int>(r.prompt.size()));
      }
      Result<MemoryPlan> mem = AccountMemory(*spec, {prompt_len, 6, 0}, *plan);
      ASSERT_TRUE(mem.ok());
      const uint64_t disk_weights = static_cast<uint64_t>(mem->weight_bytes.at(Tier::kDisk));
      EXPECT_GE(scratch[0], scratch[1] + disk_weights);
      const std::vector<int>& pc = policy.percent;
      if (pc[2] + pc[3] == 100 && pc[4] + pc[5] == 100) {
        EXPECT_EQ(scratch[1], 0u) << "only weights live on disk: no scratch file";
      }
    }
    std::filesystem::remove_all(dir);
  }
}

// A store written with 4-bit weights (`strata convert --compress-weight`) keeps them as stored
// (Model::has_q4_weights): the reference, which expands them as it uses them, gives the tokens of
// the source model quantized in memory; plans with compress_weight run them, reading disk rows in
// place; a plan without it, and the accounting of one, is refused with a message that says to
// add --compress-weight.
TEST(StoreWeightsTest, FourBitStoreRunsAsStored) {
  std::unique_ptr<Model> source;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json expected;
  const std::vector<GenerationRequest> block =
      FixtureBlock("llama-gqa", 8, &source, &tokenizer, &expected);
  ASSERT_FALSE(block.empty());
  const std::string dir = ::testing::TempDir() + "/policy_q4_store_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  StoreWriteOptions write;
  write.quantize_q4 = QuantizeWeight;
  ASSERT_TRUE(WriteStore(*source, dir, write).ok());
  auto stored = LoadModel(dir);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_TRUE((*stored)->has_q4_weights());

  const std::vector<GenerationResult> want =
      ReferenceResults(*source, *tokenizer, block, {.weight = true});
  EXPECT_EQ(TokensOf(ReferenceResults(**stored, *tokenizer, block)), TokensOf(want));
  CheckPolicies(**stored, *tokenizer, block, {kPolicies[0], kPolicies[5], kPolicies[6]}, 0,
                {.weight = true});
  // Disk rows, codes and params, are read in place from tensors.bin: the scratch file is
  // smaller than the source's (quantized at load) by exactly the plan's disk weights.
  for (const Policy& policy : {Policy{"weights_on_disk", {0, 0, 100, 0, 100, 0}, 2, 2, false},
                               Policy{"mixed", {30, 40, 20, 50, 40, 30}, 2, 2, true}}) {
    SCOPED_TRACE(policy.name);
    Result<Plan> plan = PlanFromFlexGenPercent(policy.percent, policy.gbs, policy.nb);
    ASSERT_TRUE(plan.ok());
    plan->cpu_attention = policy.cpu_attention;
    plan->compress_weight = true;
    const uint64_t scratch[2] = {ScratchBytes(*source, *tokenizer, *plan, block, want, 0),
                                 ScratchBytes(**stored, *tokenizer, *plan, block, want, 0)};
    Result<MemoryPlan> mem = AccountMemory(*ModelSpecOf(*source), {16, 8, 0}, *plan);
    ASSERT_TRUE(mem.ok());
    const auto disk_weights = static_cast<uint64_t>(mem->weight_bytes.at(Tier::kDisk));
    EXPECT_GT(disk_weights, 0u);
    EXPECT_GE(scratch[0], scratch[1] + disk_weights);
    if (policy.percent[2] == 100) {
      EXPECT_EQ(scratch[1], 0u) << "only weights live on disk: no scratch file";
    }
  }

  Plan plain;
  Result<Placement> refused = PlaceBlock(**stored, plain, {2, 1, 16, 24});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--compress-weight"), std::string::npos)
      << refused.status().message();
  Result<ModelSpec> spec = ModelSpecOf(**stored);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->q4_weights);
  EXPECT_EQ(spec->weight_dtype_bytes, 2);  // the raw tensors' bf16
  Result<MemoryPlan> unplanned = AccountMemory(*spec, {16, 8, 0}, plain);
  ASSERT_FALSE(unplanned.ok());
  EXPECT_NE(unplanned.status().message().find("--compress-weight"), std::string::npos);
  plain.compress_weight = true;
  Result<MemoryPlan> planned = AccountMemory(*spec, {16, 8, 0}, plain);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  Result<MemoryPlan> from_source = AccountMemory(*ModelSpecOf(*source), {16, 8, 0}, plain);
  ASSERT_TRUE(from_source.ok());
  for (const Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
    EXPECT_EQ(planned->total_bytes.at(t), from_source->total_bytes.at(t));
  }
  std::filesystem::remove_all(dir);
}

// The 4-bit cache at head_dim 80 and 96 (per token a group of 64 then one of 16 or 32; decode
// attention on the CPU's scalar path): synthetic Llama-style models, with sequences past the exact
// window so that whole key groups are quantized by channel (the default), under policies with
// and without CPU attention, and plain per-token keys under one. The reference on the same cache
// is what they match; its tokens differ from the fp32 cache's, so the cache really is 4-bit.
TEST(OddHeadSizePolicyTest, FourBitCacheAtHeadDim80And96MatchesTheReference) {
  for (int head_dim : {80, 96}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    ModelConfig c;
    c.vocab_size = 256;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = head_dim;
    c.hidden_size = c.num_heads * head_dim;
    c.intermediate_size = 2 * c.hidden_size;
    c.num_layers = 2;
    c.max_position_embeddings = 128;
    auto model = MakeSyntheticModel(c, DType::kF32, 13);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    SilentTokenizer tokenizer(c.vocab_size);
    std::vector<GenerationRequest> block(3);
    for (size_t i = 0; i < block.size(); ++i) {
      for (int t = 0; t < 20 + 7 * static_cast<int>(i); ++t) {
        block[i].prompt.push_back(static_cast<int32_t>((29 * i + 13 * t) % c.vocab_size));
      }
      block[i].max_new_tokens = 40;
      block[i].sampling.temperature = 0.0f;
      block[i].ignore_eos = true;
    }
    const Compression channel{.cache = true};
    ASSERT_EQ(channel.keys, CacheKeys::kChannel);
    CheckPolicies(**model, tokenizer, block,
                  {kPolicies[0], kPolicies[4], kPolicies[6], kPolicies[10]}, 0, channel);
    CheckPolicies(**model, tokenizer, block, {kPolicies[6]}, 0,
                  {.cache = true, .keys = CacheKeys::kPlain, .sink = 0, .window = 0});
    EXPECT_NE(TokensOf(ReferenceResults(**model, tokenizer, block, channel)),
              TokensOf(ReferenceResults(**model, tokenizer, block)))
        << "the 4-bit cache changed no token";
  }
}

}  // namespace
}  // namespace strata
