// The one engine on the CUDA backend: a plan with an fp32 cache is all stream work (every copy and
// op goes through the backend), so it runs on a GPU. Its prompt logits, and the log-probabilities
// of the tokens the CPU engine generated (forced, so that both decode the same tokens), are the
// CPU engine's up to fp32 rounding (the CUDA backend's fp32 GEMMs), under placements that keep
// everything on the device, spread it over the three tiers with CPU attention, or put it on disk.
// Labelled gpu: skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/model/model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"
#include "tests/backend/gpu_test_util.h"

namespace strata {
namespace {

struct Placing {
  const char* name;
  std::vector<int> percent;  // FlexGen's WG WC CG CC AG AC
  int gbs, nb;
  bool cpu_attention;
};

class EngineCudaTest : public testing::GpuTest,
                       public ::testing::WithParamInterface<const char*> {};

std::vector<GenerationResult> Generate(const Model& model, Backend& backend,
                                       const Tokenizer& tokenizer, const Placing& placing,
                                       const std::vector<GenerationRequest>& block) {
  OffloadOptions o;
  Result<Plan> plan = PlanFromFlexGenPercent(placing.percent, placing.gbs, placing.nb);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  o.plan = *plan;
  o.plan.cpu_attention = placing.cpu_attention;
  o.plan.compress_cache = false;
  o.tiers.offload_dir = ::testing::TempDir();
  OffloadGenerator engine(model, backend, tokenizer,
                          EndOfGenerationIds(tokenizer, model.config()), o);
  Result<std::vector<GenerationResult>> got = engine.TryGenerate(block);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return got.ok() ? *got : std::vector<GenerationResult>{};
}

TEST_P(EngineCudaTest, Fp32CachePlansGiveTheCpuEnginesLogits) {
  const std::string dir = std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/" + GetParam();
  Result<std::unique_ptr<Model>> model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Result<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizerForModel(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  std::vector<GenerationRequest> block;
  for (const char* text : {"The quick brown fox", "Hello", "One two three four five six"}) {
    GenerationRequest r;
    r.prompt = (*tokenizer)->Encode(text, /*add_bos=*/true);
    r.max_new_tokens = 5;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    r.prompt_logits = true;
    block.push_back(r);
  }
  auto cpu = MakeCpuBackend();
  auto gpu = MakeCudaBackend({.fp32_gemm = true});
  ASSERT_NE(gpu, nullptr);
  const Placing placings[] = {
      {"all_gpu", {100, 0, 100, 0, 100, 0}, 3, 1, false},
      {"mixed_cpu_attention", {30, 40, 20, 50, 40, 30}, 2, 2, true},
      {"all_disk", {0, 0, 0, 0, 0, 0}, 1, 3, false},
  };
  for (const Placing& placing : placings) {
    SCOPED_TRACE(placing.name);
    // The CPU engine's greedy tokens, then both engines forced to them.
    const std::vector<GenerationResult> greedy =
        Generate(**model, *cpu, **tokenizer, placing, block);
    ASSERT_EQ(greedy.size(), block.size());
    std::vector<GenerationRequest> forced = block;
    for (size_t i = 0; i < forced.size(); ++i) forced[i].forced = greedy[i].tokens;
    const std::vector<GenerationResult> want =
        Generate(**model, *cpu, **tokenizer, placing, forced);
    const std::vector<GenerationResult> got =
        Generate(**model, *gpu, **tokenizer, placing, forced);
    ASSERT_EQ(want.size(), block.size());
    ASSERT_EQ(got.size(), block.size());
    for (size_t i = 0; i < block.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_FALSE(want[i].prompt_logits.empty());
      EXPECT_LT(testing::NormalizedError(testing::ToDouble(want[i].prompt_logits),
                                         got[i].prompt_logits),
                1e-4);
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
      for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
        EXPECT_NEAR(got[i].logprobs[t], want[i].logprobs[t], 1e-3) << "token " << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineCudaTest, ::testing::Values("opt", "llama-gqa", "qwen3"));

}  // namespace
}  // namespace strata
