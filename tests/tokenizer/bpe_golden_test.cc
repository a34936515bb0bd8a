// Token ids of tokenizers trained and run by Hugging Face tokenizers/transformers
// (scripts/make_tokenizer_golden.py), reproduced from their tokenizer.json files.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace strata {
namespace {

using nlohmann::json;
using testing_util::Escaped;

std::vector<int32_t> Ids(const json& array) { return array.get<std::vector<int32_t>>(); }

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromJsonFile(path);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

class BpeGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ =
        testing_util::ReadJson(testing_util::TokenizerDataPath("bpe_golden.json"))[GetParam()];
    ASSERT_TRUE(golden_.is_object());
    tokenizer_ = Load(testing_util::TokenizerDataPath(golden_["file"].get<std::string>()));
    ASSERT_NE(tokenizer_, nullptr);
  }
  json golden_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(BpeGoldenTest, EncodesLikeHuggingFace) {
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(tokenizer_->Encode(text, /*add_bos=*/false), Ids(c["ids"])) << Escaped(text);
    EXPECT_EQ(tokenizer_->Encode(text, tokenizer_->add_bos_by_default()), Ids(c["default_ids"]))
        << Escaped(text);
  }
}

TEST_P(BpeGoldenTest, DecodesLikeHuggingFace) {
  for (const json& c : golden_["cases"]) {
    EXPECT_EQ(tokenizer_->Decode(Ids(c["ids"]), /*skip_special=*/false),
              c["decoded"].get<std::string>())
        << Escaped(c["text"]);
  }
}

TEST_P(BpeGoldenTest, RoundTripsEveryHardString) {
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    if (text.find("<mask>") != std::string::npos || text.find("<sep>") != std::string::npos) {
      continue;  // lstrip/rstrip tokens swallow whitespace by design
    }
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, false), false), text) << Escaped(text);
  }
}

TEST_P(BpeGoldenTest, SpecialTokens) {
  EXPECT_EQ(tokenizer_->vocab_size(), golden_["vocab_size"].get<int>());
  EXPECT_EQ(tokenizer_->bos_id(), golden_["bos_id"].get<int>());
  EXPECT_EQ(tokenizer_->eos_id(), golden_["eos_id"].is_null() ? -1 : golden_["eos_id"].get<int>());
  EXPECT_EQ(tokenizer_->add_bos_by_default(), golden_["add_bos_by_default"].get<bool>());
  const int32_t im_start = tokenizer_->SpecialTokenId("<|im_start|>");
  ASSERT_GE(im_start, 0);
  EXPECT_TRUE(tokenizer_->IsSpecial(im_start));
  EXPECT_EQ(tokenizer_->TokenBytes(im_start), "<|im_start|>");
  EXPECT_EQ(tokenizer_->Decode({im_start, tokenizer_->Encode("hi", false)[0]}, true),
            tokenizer_->TokenBytes(tokenizer_->Encode("hi", false)[0]));
  EXPECT_EQ(tokenizer_->SpecialTokenId("<|no such token|>"), -1);
}

TEST_P(BpeGoldenTest, InvalidUtf8IsEncodedByteByByte) {
  const std::string text = "ok \xFF\xFE bad \xE4\xB8 cut \xF0\x9F\x8E";
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, false), false), text);
}

TEST_P(BpeGoldenTest, ConcurrentEncodesAgree) {
  const json& cases = golden_["cases"];
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (const json& c : cases) {
          if (tokenizer_->Encode(c["text"].get<std::string>(), false) != Ids(c["ids"])) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

INSTANTIATE_TEST_SUITE_P(Styles, BpeGoldenTest,
                         ::testing::Values("gpt2_style", "llama3_style", "qwen2_style"));

// The GPT-2 style model under other pre-tokenizers: Digits, every Split behaviour, invert,
// String patterns and add_prefix_space.
TEST(BpeGoldenVariantsTest, PreTokenizerVariants) {
  const json golden = testing_util::ReadJson(testing_util::TokenizerDataPath("bpe_golden.json"));
  const json& gpt2 = golden["gpt2_style"];
  json base = testing_util::ReadJson(testing_util::TokenizerDataPath(gpt2["file"]));
  ASSERT_FALSE(gpt2["variants"].empty());
  for (const auto& [name, variant] : gpt2["variants"].items()) {
    SCOPED_TRACE(name);
    base["pre_tokenizer"] = variant["pre_tokenizer"];
    const auto dir = testing_util::ScratchDir();
    testing_util::WriteFile(dir / "tokenizer.json", base.dump());
    std::unique_ptr<Tokenizer> tokenizer = Load((dir / "tokenizer.json").string());
    ASSERT_NE(tokenizer, nullptr);
    const json& cases = gpt2["cases"];
    ASSERT_EQ(cases.size(), variant["ids"].size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string text = cases[i]["text"];
      EXPECT_EQ(tokenizer->Encode(text, false), Ids(variant["ids"][i])) << Escaped(text);
    }
  }
}

}  // namespace
}  // namespace strata
