// The SentencePiece tokenizers against the sentencepiece library's ids for hard strings
// (scripts/make_spm_golden.py, tests/data/tokenizer/spm_golden.json), for a small BPE model trained
// with Llama 2's options: strata's own, from its pieces, scores and types as a GGUF file carries
// them (tokenizer.ggml.model = "llama"); and the library-backed one of a Hugging Face directory's
// tokenizer.model (the same model, tests/data/tokenizer/spm_style), which must agree with it on
// control tokens in the text, BOS and spelling.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/tokenizer/sentencepiece_model.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace strata {
namespace {

using nlohmann::json;
using testing_util::Escaped;

class SpmTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = testing_util::ReadJson(testing_util::TokenizerDataPath("spm_golden.json"));
    vocab_.model = "llama";
    vocab_.tokens = golden_["tokens"].get<std::vector<std::string>>();
    vocab_.scores = golden_["scores"].get<std::vector<float>>();
    vocab_.token_types = golden_["types"].get<std::vector<int32_t>>();
    vocab_.bos_token_id = golden_["bos_id"];
    vocab_.eos_token_id = golden_["eos_id"];
    vocab_.add_bos = true;
    vocab_.add_space_prefix = golden_["add_space_prefix"];
    tokenizer_ = Build(vocab_);
    ASSERT_NE(tokenizer_, nullptr);
  }

  static std::unique_ptr<Tokenizer> Build(const GgufVocab& vocab) {
    Result<std::unique_ptr<Tokenizer>> t = Tokenizer::FromGgufVocab(vocab);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : nullptr;
  }

  json golden_;
  GgufVocab vocab_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(SpmTokenizerTest, EncodesLikeSentencePiece) {
  int byte_fallbacks = 0;
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    const std::vector<int32_t> ids = c["ids"];
    EXPECT_EQ(tokenizer_->Encode(text, /*add_bos=*/false), ids) << Escaped(text);
    for (int32_t id : ids) byte_fallbacks += vocab_.token_types[static_cast<size_t>(id)] == 6;
  }
  EXPECT_GT(byte_fallbacks, 20) << "the golden must exercise byte fallback";
}

// Decoded text keeps the space the prefix put before the first word (sentencepiece drops it),
// so it is " " + the text wherever sentencepiece round-trips.
TEST_F(SpmTokenizerTest, DecodesToTheTextAfterTheSpacePrefix) {
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    if (!c["roundtrip"].get<bool>() || text.empty()) continue;
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text, false), false), " " + text)
        << Escaped(text);
  }
}

// Control tokens written in the text are themselves, and the text after one gets the space prefix
// again (llama.cpp); BOS is prepended by default.
TEST_F(SpmTokenizerTest, ControlTokensInTheTextAndBos) {
  const int32_t bos = tokenizer_->bos_id(), eos = tokenizer_->eos_id();
  EXPECT_TRUE(tokenizer_->add_bos_by_default());
  EXPECT_EQ(tokenizer_->SpecialTokenId("</s>"), eos);
  EXPECT_TRUE(tokenizer_->IsSpecial(eos));
  const std::vector<int32_t> hello = tokenizer_->Encode("hello", false),
                             world = tokenizer_->Encode("world", false);
  std::vector<int32_t> want = {bos};
  want.insert(want.end(), hello.begin(), hello.end());
  want.push_back(eos);
  want.insert(want.end(), world.begin(), world.end());
  EXPECT_EQ(tokenizer_->Encode("hello</s>world", true), want);
  EXPECT_EQ(tokenizer_->Decode(want, /*skip_special=*/true), " hello world");
  EXPECT_EQ(tokenizer_->Decode({eos}, false), "</s>");

  vocab_.add_space_prefix = false;
  std::unique_ptr<Tokenizer> bare = Build(vocab_);
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(bare->Decode(bare->Encode("hello world", false), false), "hello world");
}

TEST_F(SpmTokenizerTest, TokenizerModelFileAgreesWithTheGgufVocabulary) {
  Result<std::unique_ptr<Tokenizer>> file =
      LoadSentencePieceModel(testing_util::TokenizerDataPath("spm_style/tokenizer.model"), true);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const Tokenizer& t = **file;
  EXPECT_EQ(t.vocab_size(), tokenizer_->vocab_size());
  EXPECT_EQ(t.bos_id(), tokenizer_->bos_id());
  EXPECT_EQ(t.eos_id(), tokenizer_->eos_id());
  EXPECT_TRUE(t.add_bos_by_default());
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(t.Encode(text, false), c["ids"].get<std::vector<int32_t>>()) << Escaped(text);
  }
  for (const char* text : {"hello</s>world", "<s> a<s>b </s>", "x\n</s>\n"}) {
    const std::vector<int32_t> ids = t.Encode(text, true);
    EXPECT_EQ(ids, tokenizer_->Encode(text, true)) << Escaped(text);
    EXPECT_EQ(t.Decode(ids, false), tokenizer_->Decode(ids, false)) << Escaped(text);
  }
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    EXPECT_EQ(t.TokenBytes(id), tokenizer_->TokenBytes(id)) << id;
    EXPECT_EQ(t.IsSpecial(id), tokenizer_->IsSpecial(id)) << id;
  }
  EXPECT_FALSE(
      LoadSentencePieceModel(testing_util::TokenizerDataPath("spm_golden.json"), true).ok());
  EXPECT_EQ(LoadSentencePieceModel("/no/such/tokenizer.model", true).status().code(),
            StatusCode::kNotFound);
}

TEST_F(SpmTokenizerTest, MismatchedScoresAreCorrupt) {
  vocab_.scores.pop_back();
  Result<std::unique_ptr<Tokenizer>> t = Tokenizer::FromGgufVocab(vocab_);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(t.status().message().find("scores"), std::string::npos) << t.status().ToString();
}

}  // namespace
}  // namespace strata
