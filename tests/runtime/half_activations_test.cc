// The one engine with half activations (a device backend whose ActivationType is fp16 or bf16, as
// the CUDA backend's is), on the CPU backend standing in for that device
// (CpuBackendOptions::activations: it stores activations in the half type and computes in fp32,
// as a GPU's kernels do), with the plain fp32 CPU backend on the host side of CPU attention, as
// in a GPU run:
//   - every placement gives the tokens and prompt logits of all-on-the-device bit for bit: the
//     sizes, offsets, copies and conversions of 2-byte activations are right on every tier, the
//     dense cache's and the CPU attention workspace's included (a wrong offset or a missed
//     conversion moves bits);
//   - they are the fp32 engine's within half precision (with the fp32 engine's greedy tokens
//     forced, so that both decode the same tokens): bounds stated below;
//   - every run's peak bytes stay within the plan accounted with 2-byte activations.
// With the dense cache and with the default 4-bit cache and 4-bit weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/model/model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"

namespace strata {
namespace {

struct Placing {
  const char* name;
  std::vector<int> percent;  // FlexGen's WG WC CG CC AG AC
  int gbs, nb;
  bool cpu_attention;
};

const Placing kPlacings[] = {
    {"all_gpu", {100, 0, 100, 0, 100, 0}, 3, 1, false},
    {"all_cpu", {0, 100, 0, 100, 0, 100}, 1, 3, false},
    {"all_disk", {0, 0, 0, 0, 0, 0}, 2, 2, false},
    {"mixed_cpu_attention", {30, 40, 20, 50, 40, 30}, 1, 3, true},
    {"all_disk_cpu_attention", {0, 0, 0, 0, 0, 0}, 3, 1, true},
    {"odd_splits_cpu_attention", {55, 25, 33, 33, 10, 60}, 2, 2, true},
};

struct Compression {
  bool q4 = false;  // the default 4-bit cache (keys by channel, exact sink and window) and 4-bit
                    // weights
};

Plan PlanOf(const Placing& placing, Compression c) {
  Plan plan = *PlanFromFlexGenPercent(placing.percent, placing.gbs, placing.nb);
  plan.cpu_attention = placing.cpu_attention;
  plan.compress_cache = c.q4;
  plan.compress_weight = c.q4;
  if (c.q4) {  // a window of one key group, so that the sequences quantize whole groups
    plan.cache_sink = 1;
    plan.cache_window = kChannelKeyGroup;
  }
  return plan;
}

struct EngineRun {
  std::vector<GenerationResult> results;
  ExecutorMetrics metrics;
};

EngineRun Generate(const Model& model, const Tokenizer& tokenizer, SpanType activations,
             const Plan& plan, const std::vector<GenerationRequest>& block) {
  auto device = MakeCpuBackend({.streams = {}, .activations = activations});
  auto cpu = MakeCpuBackend();
  EXPECT_EQ(device->ActivationType(DType::kF32), activations);
  OffloadOptions o;
  o.plan = plan;
  o.tiers.offload_dir = ::testing::TempDir();
  OffloadGenerator engine(model, *device, *cpu, tokenizer,
                          EndOfGenerationIds(tokenizer, model.config()), o);
  Result<std::vector<GenerationResult>> got = engine.TryGenerate(block);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return {got.ok() ? *got : std::vector<GenerationResult>{}, engine.metrics()};
}

// ‖got − want‖₂ / ‖want‖₂ over all the prompt logits of a block.
double PromptLogitsError(const std::vector<GenerationResult>& want,
                         const std::vector<GenerationResult>& got) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    EXPECT_EQ(got[i].prompt_logits.size(), want[i].prompt_logits.size());
    for (size_t j = 0; j < want[i].prompt_logits.size() && j < got[i].prompt_logits.size(); ++j) {
      const double d = double{got[i].prompt_logits[j]} - want[i].prompt_logits[j];
      diff += d * d;
      norm += double{want[i].prompt_logits[j]} * want[i].prompt_logits[j];
    }
  }
  return std::sqrt(diff / norm);
}

class HalfActivationsTest
    : public ::testing::TestWithParam<std::tuple<const char*, SpanType, bool>> {
 protected:
  void SetUp() override {
    const std::string dir =
        std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/" + std::get<0>(GetParam());
    Result<std::unique_ptr<Model>> model = LoadModel(dir);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(*model);
    Result<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizerForModel(*model_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(*tokenizer);
    // Long enough that the 4-bit cache quantizes whole key groups past its exact window.
    for (const char* text : {"The quick brown fox", "Hello", "One two three four five six",
                             "A longer prompt, with punctuation; and more words in it"}) {
      GenerationRequest r;
      r.prompt = tokenizer_->Encode(text, /*add_bos=*/true);
      r.max_new_tokens = 40;
      r.sampling.temperature = 0.0f;
      r.ignore_eos = true;
      r.prompt_logits = true;
      block_.push_back(r);
    }
  }

  SpanType activations() const { return std::get<1>(GetParam()); }
  Compression compression() const { return {.q4 = std::get<2>(GetParam())}; }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<GenerationRequest> block_;
};

TEST_P(HalfActivationsTest, EveryPlacementGivesTheBitsOfAllOnTheDevice) {
  const EngineRun want =
      Generate(*model_, *tokenizer_, activations(), PlanOf(kPlacings[0], compression()), block_);
  ASSERT_EQ(want.results.size(), block_.size());
  for (const Placing& placing : kPlacings) {
    SCOPED_TRACE(placing.name);
    const Plan plan = PlanOf(placing, compression());
    const EngineRun got = Generate(*model_, *tokenizer_, activations(), plan, block_);
    ASSERT_EQ(got.results.size(), block_.size());
    for (size_t i = 0; i < block_.size(); ++i) {
      EXPECT_EQ(got.results[i].tokens, want.results[i].tokens) << "request " << i;
      EXPECT_EQ(got.results[i].prompt_logits, want.results[i].prompt_logits) << "request " << i;
    }
    for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
      ASSERT_GE(got.metrics.planned_bytes.at(t), 0);
      EXPECT_LE(got.metrics.peak_bytes.at(t), got.metrics.planned_bytes.at(t))
          << TierName(t) << "\n" << got.metrics.ToString();
    }
  }
}

// The half engine against the fp32 one, both forced to the fp32 engine's greedy tokens. Every
// activation is rounded to the half type where it is stored (2^-11 relative for fp16, 2^-8 for
// bf16) and the errors compound over the layers; with the 4-bit cache a rounded key or value may
// also land on the neighbouring code, so single log-probabilities move by tenths, and their mean
// is what is bounded. The bounds are about three times the largest these fixtures show (prompt
// logits, normalized: fp16 2.4e-3, bf16 1.9e-2; mean log-probability error: fp16 4.3e-3 dense and
// 2.1e-2 4-bit, bf16 3.9e-2 and 8.1e-2), so they fail on a systematic error (a wrong scale, a
// lost conversion: errors of order one) and not on rounding.
TEST_P(HalfActivationsTest, TheyAreTheFp32EnginesWithinHalfPrecision) {
  const Plan plan = PlanOf(kPlacings[3], compression());
  const EngineRun greedy = Generate(*model_, *tokenizer_, SpanType::kF32, plan, block_);
  ASSERT_EQ(greedy.results.size(), block_.size());
  std::vector<GenerationRequest> forced = block_;
  for (size_t i = 0; i < forced.size(); ++i) forced[i].forced = greedy.results[i].tokens;
  const EngineRun want = Generate(*model_, *tokenizer_, SpanType::kF32, plan, forced);
  const EngineRun got = Generate(*model_, *tokenizer_, activations(), plan, forced);
  ASSERT_EQ(got.results.size(), block_.size());
  const bool bf16 = activations() == SpanType::kBF16;
  const double logits_bound = bf16 ? 6e-2 : 8e-3;
  const double logprob_bound = compression().q4 ? (bf16 ? 0.25 : 0.06) : (bf16 ? 0.12 : 0.015);
  const double logits_error = PromptLogitsError(want.results, got.results);
  EXPECT_LT(logits_error, logits_bound);
  EXPECT_GT(logits_error, 0.0) << "the activations were not rounded";
  double worst = 0.0, sum = 0.0;
  int count = 0;
  for (size_t i = 0; i < block_.size(); ++i) {
    ASSERT_EQ(got.results[i].logprobs.size(), want.results[i].logprobs.size());
    for (size_t t = 0; t < got.results[i].logprobs.size(); ++t) {
      const double d = std::abs(got.results[i].logprobs[t] - want.results[i].logprobs[t]);
      worst = std::max(worst, d);
      sum += d;
      ++count;
    }
  }
  EXPECT_LT(sum / count, logprob_bound);
  std::printf("%s %s %s: prompt logits %.2e, log-probability mean %.4f worst %.3f\n",
              std::get<0>(GetParam()), SpanTypeName(activations()),
              compression().q4 ? "4-bit" : "dense", logits_error, sum / count, worst);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, HalfActivationsTest,
    ::testing::Combine(::testing::Values("opt", "llama-gqa", "qwen3"),
                       ::testing::Values(SpanType::kF16, SpanType::kBF16), ::testing::Bool()),
    [](const auto& info) {
      std::string name = std::string(std::get<0>(info.param)) + "_" +
                         SpanTypeName(std::get<1>(info.param)) +
                         (std::get<2>(info.param) ? "_q4" : "_dense");
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

}  // namespace
}  // namespace strata
