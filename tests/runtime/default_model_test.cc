// The default model (SmolLM2-135M-Instruct, Q4_1 GGUF) against transformers loading the same
// file (tests/data/smollm2/greedy.json, made by scripts/make_fixtures.py): prompt token ids,
// last-position logits and 24 greedy tokens, each prompt alone and all of them in one block.
// Skips when the model is not in the cache (scripts/setup.sh fetches it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
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

std::string DefaultModelPath() {
  const char* cache = std::getenv("STRATA_CACHE");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string dir = cache && *cache ? cache
                          : xdg && *xdg   ? std::string(xdg) + "/strata"
                                          : std::string(std::getenv("HOME")) + "/.cache/strata";
  return dir + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = DefaultModelPath();
    if (!std::filesystem::exists(path)) return;
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(*model).release();
    auto tokenizer = LoadTokenizerForModel(*model_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(*tokenizer).release();
    std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/tests/data/smollm2/greedy.json");
    golden_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    delete golden_;
    delete tokenizer_;
    delete model_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "default model not in the cache; run scripts/setup.sh";
  }

  static Model* model_;
  static Tokenizer* tokenizer_;
  static nlohmann::json* golden_;
};
Model* DefaultModelTest::model_ = nullptr;
Tokenizer* DefaultModelTest::tokenizer_ = nullptr;
nlohmann::json* DefaultModelTest::golden_ = nullptr;

TEST_F(DefaultModelTest, MatchesTransformersOnTheExamplePrompts) {
  auto backend = MakeCpuBackend();
  auto cpu_backend = MakeCpuBackend();
  const std::vector<int32_t> eog = EndOfGenerationIds(*tokenizer_, model_->config());
  const int vocab = model_->config().vocab_size;
  const auto& rows = (*golden_)["variants"]["default_no_bos"];
  ASSERT_EQ(rows.size(), 12u);
  OffloadOptions options;
  options.plan =
      *PlanFromFlexGenPercent({100, 0, 100, 0, 100, 0}, static_cast<int>(rows.size()), 1);
  OffloadGenerator generator(*model_, *backend, *cpu_backend, *tokenizer_, eog, options);

  std::vector<GenerationRequest> block;
  for (const auto& row : rows) {
    const std::string id = row["custom_id"];
    const std::vector<int32_t> ids = row["input_ids"];
    EXPECT_EQ(tokenizer_->Encode(row["prompt"].get<std::string>(),
                                 tokenizer_->add_bos_by_default()),
              ids)
        << id;
    GenerationRequest r;
    r.prompt = ids;
    r.max_new_tokens = 24;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    r.prompt_logits = true;
    block.push_back(r);
  }

  const std::vector<GenerationResult> batched = generator.Generate(block);
  for (size_t p = 0; p < rows.size(); ++p) {
    const auto& row = rows[p];
    const std::string id = row["custom_id"];
    // Last-position logits: the top 20 of transformers, to 1e-4 of the largest logit.
    const std::vector<float>& logits = batched[p].prompt_logits;
    ASSERT_EQ(logits.size(), block[p].prompt.size() * vocab) << id;
    const float* last = logits.data() + (block[p].prompt.size() - 1) * vocab;
    const double scale = row["last_logits_stats"]["max_abs"].get<double>();
    for (const auto& pair : row["last_logits_top20"]) {
      const int token = pair[0];
      EXPECT_NEAR(last[token], pair[1].get<double>(), 1e-4 * scale) << id << " token " << token;
    }
    const std::vector<int32_t> want = row["greedy"];
    // transformers' min_new_tokens masks EOS where it was the argmax; strata (ignore_eos) emits
    // it. Compare up to the first such step and require EOS there.
    size_t compare = want.size();
    if (!row["eos_suppressed_steps"].empty()) compare = row["eos_suppressed_steps"][0];
    const std::vector<int32_t> alone = generator.Generate({block[p]})[0].tokens;
    for (const auto* got : {&batched[p].tokens, &alone}) {
      ASSERT_EQ(got->size(), want.size()) << id;
      EXPECT_EQ(std::vector<int32_t>(got->begin(), got->begin() + compare),
                std::vector<int32_t>(want.begin(), want.begin() + compare))
          << id;
      if (compare < want.size()) {
        EXPECT_NE(std::find(eog.begin(), eog.end(), (*got)[compare]), eog.end()) << id;
      }
    }
  }
}

}  // namespace
}  // namespace strata
