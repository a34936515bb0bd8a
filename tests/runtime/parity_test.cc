// Parity with Hugging Face transformers: small random-weight OPT and Llama models built by
// scripts/make_fixtures.py, their logits and greedy tokens recorded there. strata must reproduce
// the logits to 1e-4 relative error and the greedy tokens exactly, with the prompts batched
// together (left padding) as `strata run` batches them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/backend/backend.h"
#include "src/model/model.h"
#include "src/runtime/generator.h"
#include "src/runtime/model_tokenizer.h"

namespace strata {
namespace {

const std::string kFixtures = std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/";

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class ParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParityTest, LogitsAndGreedyTokensMatchTransformers) {
  const std::string dir = kFixtures + GetParam();
  ASSERT_TRUE(std::filesystem::exists(dir + "/expected.json")) << dir;
  const nlohmann::json expected = ReadJson(dir + "/expected.json");
  auto model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto tokenizer = LoadTokenizerForModel(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  auto backend = MakeCpuBackend();
  Transformer transformer(**model, *backend);
  Generator generator(transformer, **tokenizer, {});
  const int vocab = (*model)->config().vocab_size;

  std::vector<GenerationRequest> block;
  for (size_t p = 0; p < expected["prompts"].size(); ++p) {
    const std::string prompt = expected["prompts"][p];
    const std::vector<int32_t> ids = expected["input_ids"][p];
    EXPECT_EQ((*tokenizer)->Encode(prompt, (*tokenizer)->add_bos_by_default()), ids)
        << "prompt " << p;

    const std::vector<float> logits = generator.PromptLogits(ids);
    const auto& want = expected["logits"][p];
    ASSERT_EQ(want.size(), ids.size());
    for (size_t t = 0; t < ids.size(); ++t) {
      double diff = 0, norm = 0, max_ref = 0, max_err = 0;
      for (int v = 0; v < vocab; ++v) {
        const double ref = want[t][v].get<double>();
        const double got = logits[t * vocab + v];
        diff += (got - ref) * (got - ref);
        norm += ref * ref;
        max_ref = std::max(max_ref, std::abs(ref));
        max_err = std::max(max_err, std::abs(got - ref));
      }
      EXPECT_LE(std::sqrt(diff / norm), 1e-4) << "prompt " << p << " position " << t;
      EXPECT_LE(max_err, 1e-4 * max_ref) << "prompt " << p << " position " << t;
    }
    GenerationRequest r;
    r.prompt = ids;
    r.max_new_tokens = static_cast<int>(expected["greedy"][p].size());
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    block.push_back(r);
  }
  const std::vector<GenerationResult> batched = generator.Generate(block);
  for (size_t p = 0; p < block.size(); ++p) {
    const std::vector<int32_t> want = expected["greedy"][p];
    EXPECT_EQ(batched[p].tokens, want) << "prompt " << p << " in a block of " << block.size();
    EXPECT_EQ(generator.Generate({block[p]})[0].tokens, want) << "prompt " << p << " alone";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ParityTest,
                         ::testing::Values("opt", "llama-gqa", "llama3-rope", "llama-bias"));

}  // namespace
}  // namespace strata
