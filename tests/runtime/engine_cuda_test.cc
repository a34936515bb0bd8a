// The one engine on the CUDA backend: every plan is all stream work (every copy and op goes
// through the backend), so it runs on a GPU. Its prompt logits, and the log-probabilities of the
// tokens the CPU engine generated (forced, so that both decode the same tokens), are the CPU
// engine's, under placements that keep everything on the device, spread it over the three tiers
// with CPU attention, or put it on disk: up to fp32 rounding (the CUDA backend with fp32
// activations and fp32 GEMMs, CudaBackendOptions::activations and fp32_gemm, rather than its
// default fp16/bf16 activations) with an fp32 cache on the fixtures; with the default 4-bit cache
// (keys by channel, exact sink and window rows) on a synthetic model whose head size the CUDA
// kernels take, up to the decode attention's fp16 operands. Labelled gpu: skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/model/model.h"
#include "src/model/synthetic_model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"
#include "src/tokenizer/silent_tokenizer.h"
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
                                       const std::vector<GenerationRequest>& block,
                                       bool q4_cache) {
  OffloadOptions o;
  Result<Plan> plan = PlanFromFlexGenPercent(placing.percent, placing.gbs, placing.nb);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  o.plan = *plan;
  o.plan.cpu_attention = placing.cpu_attention;
  o.plan.compress_cache = q4_cache;
  o.tiers.offload_dir = ::testing::TempDir();
  auto cpu_backend = MakeCpuBackend();
  OffloadGenerator engine(model, backend, *cpu_backend, tokenizer,
                          EndOfGenerationIds(tokenizer, model.config()), o);
  Result<std::vector<GenerationResult>> got = engine.TryGenerate(block);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return got.ok() ? *got : std::vector<GenerationResult>{};
}

// Generates `block` (greedy, with prompt logits) on `model` with the CPU engine and the CUDA
// engine under each placement, the cache 4-bit or fp32, and compares them (the file's comment):
// prompt logits to `logits_error` normalized, log-probabilities to `logprob_error`.
void ExpectTheCpuEnginesResults(const Model& model, const Tokenizer& tokenizer,
                                const std::vector<GenerationRequest>& block, bool q4_cache,
                                double logits_error, double logprob_error) {
  auto cpu = MakeCpuBackend();
  auto gpu = MakeCudaBackend({.device = 0, .activations = SpanType::kF32, .fp32_gemm = true});
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
        Generate(model, *cpu, tokenizer, placing, block, q4_cache);
    ASSERT_EQ(greedy.size(), block.size());
    std::vector<GenerationRequest> forced = block;
    for (size_t i = 0; i < forced.size(); ++i) forced[i].forced = greedy[i].tokens;
    const std::vector<GenerationResult> want =
        Generate(model, *cpu, tokenizer, placing, forced, q4_cache);
    const std::vector<GenerationResult> got =
        Generate(model, *gpu, tokenizer, placing, forced, q4_cache);
    ASSERT_EQ(want.size(), block.size());
    ASSERT_EQ(got.size(), block.size());
    for (size_t i = 0; i < block.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_FALSE(want[i].prompt_logits.empty());
      EXPECT_LT(testing::NormalizedError(testing::ToDouble(want[i].prompt_logits),
                                         got[i].prompt_logits),
                logits_error);
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
      for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
        EXPECT_NEAR(got[i].logprobs[t], want[i].logprobs[t], logprob_error) << "token " << t;
      }
    }
  }
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
  ExpectTheCpuEnginesResults(**model, **tokenizer, block, /*q4_cache=*/false, 1e-4, 1e-3);
}

class EngineCudaQ4CacheTest : public testing::GpuTest {};

// The default 4-bit cache needs a head size the CUDA kernels take (64), which no fixture has: a
// synthetic Llama-style model, with sequences long enough that tokens leave the exact window and
// whole key groups are quantized. The prefill attends the prompt's fp32 keys, so the prompt
// logits stay within fp32 rounding; decode reads the 4-bit cache with fp16 operands (5e-3
// normalized on the kernels' own tests), which moves a log-probability by a few hundredths.
TEST_F(EngineCudaQ4CacheTest, FourBitCachePlansGiveTheCpuEnginesLogits) {
  ModelConfig c;
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 256;
  Result<std::unique_ptr<Model>> model = MakeSyntheticModel(c, DType::kF16, 5);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  SilentTokenizer tokenizer(c.vocab_size);
  std::vector<GenerationRequest> block(3);
  for (size_t i = 0; i < block.size(); ++i) {
    for (int t = 0; t < 40 + 5 * static_cast<int>(i); ++t) {
      block[i].prompt.push_back(static_cast<int32_t>((29 * i + 13 * t) % c.vocab_size));
    }
    block[i].max_new_tokens = 48;
    block[i].sampling.temperature = 0.0f;
    block[i].ignore_eos = true;
    block[i].prompt_logits = true;
  }
  ExpectTheCpuEnginesResults(**model, tokenizer, block, /*q4_cache=*/true, 1e-4, 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineCudaTest, ::testing::Values("opt", "llama-gqa", "qwen3"));

}  // namespace
}  // namespace strata
