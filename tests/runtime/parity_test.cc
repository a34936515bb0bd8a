// Parity with Hugging Face transformers: small random-weight OPT, Llama, Qwen2, Qwen3 and Phi-3
// models built by scripts/make_fixtures.py, their logits and greedy tokens recorded there. The
// engine (OffloadGenerator, everything in device memory) must reproduce the logits of every
// prompt position to 1e-4 relative error and the greedy tokens exactly, with the prompts batched
// together (left padding) as `strata run` batches them, and each prompt alone. The Qwen and
// Phi-3 fixtures are also read as the GGUF files llama.cpp's conventions make of them
// (tests/data/gguf/hf_to_gguf.py), tokenizer included.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/model/model.h"
#include "policy/plan.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"

namespace strata {
namespace {

const std::string kData = std::string(STRATA_SOURCE_DIR) + "/tests/data/";

// A model to load and the fixture whose expected.json it must reproduce.
struct ParityCase {
  std::string model;    // relative to tests/data
  std::string fixture;  // a directory of tests/data/fixtures
};

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class ParityTest : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ParityTest, LogitsAndGreedyTokensMatchTransformers) {
  const std::string expected_path = kData + "fixtures/" + GetParam().fixture + "/expected.json";
  ASSERT_TRUE(std::filesystem::exists(expected_path)) << expected_path;
  const nlohmann::json expected = ReadJson(expected_path);
  auto model = LoadModel(kData + GetParam().model);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto tokenizer = LoadTokenizerForModel(**model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  const size_t prompts = expected["prompts"].size();
  OffloadOptions options;
  options.plan = *PlanFromFlexGenPercent({100, 0, 100, 0, 100, 0}, static_cast<int>(prompts), 1);
  OffloadGenerator generator(**model, *backend, *cpu_backend, **tokenizer, {}, options);
  const int vocab = (*model)->config().vocab_size;

  std::vector<GenerationRequest> block;
  for (size_t p = 0; p < prompts; ++p) {
    const std::string prompt = expected["prompts"][p];
    const std::vector<int32_t> ids = expected["input_ids"][p];
    EXPECT_EQ((*tokenizer)->Encode(prompt, (*tokenizer)->add_bos_by_default()), ids)
        << "prompt " << p;
    GenerationRequest r;
    r.prompt = ids;
    r.max_new_tokens = static_cast<int>(expected["greedy"][p].size());
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    r.prompt_logits = true;
    block.push_back(r);
  }
  const std::vector<GenerationResult> batched = generator.Generate(block);
  for (size_t p = 0; p < prompts; ++p) {
    const std::vector<int32_t>& ids = block[p].prompt;
    const std::vector<float>& logits = batched[p].prompt_logits;
    ASSERT_EQ(logits.size(), ids.size() * vocab) << "prompt " << p;
    const auto& want_logits = expected["logits"][p];
    ASSERT_EQ(want_logits.size(), ids.size());
    for (size_t t = 0; t < ids.size(); ++t) {
      double diff = 0, norm = 0, max_ref = 0, max_err = 0;
      for (int v = 0; v < vocab; ++v) {
        const double ref = want_logits[t][v].get<double>();
        const double got = logits[t * vocab + v];
        diff += (got - ref) * (got - ref);
        norm += ref * ref;
        max_ref = std::max(max_ref, std::abs(ref));
        max_err = std::max(max_err, std::abs(got - ref));
      }
      EXPECT_LE(std::sqrt(diff / norm), 1e-4) << "prompt " << p << " position " << t;
      EXPECT_LE(max_err, 1e-4 * max_ref) << "prompt " << p << " position " << t;
    }
    const std::vector<int32_t> want = expected["greedy"][p];
    EXPECT_EQ(batched[p].tokens, want) << "prompt " << p << " in a block of " << block.size();
    EXPECT_EQ(generator.Generate({block[p]})[0].tokens, want) << "prompt " << p << " alone";
  }
}

ParityCase Fixture(const std::string& name) { return {"fixtures/" + name, name}; }

INSTANTIATE_TEST_SUITE_P(Fixtures, ParityTest,
                         ::testing::Values(Fixture("opt"), Fixture("llama-gqa"),
                                           Fixture("llama3-rope"), Fixture("llama-bias"),
                                           Fixture("qwen2"), Fixture("qwen3"),
                                           Fixture("qwen2-yarn"), Fixture("phi3"),
                                           ParityCase{"gguf/qwen2-tiny.gguf", "qwen2"},
                                           ParityCase{"gguf/qwen3-tiny.gguf", "qwen3"},
                                           ParityCase{"gguf/qwen2-yarn-tiny.gguf", "qwen2-yarn"},
                                           ParityCase{"gguf/phi3-tiny.gguf", "phi3"}),
                         [](const auto& info) {
                           std::string n = info.param.model.substr(info.param.model.find('/') + 1);
                           for (char& c : n)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace strata
