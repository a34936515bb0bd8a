// GGUF vocabularies: small hand-made ones for the pre-tokenizer mapping and errors, and the
// default model's (SmolLM2-135M-Instruct) against ids recorded through transformers and the
// tokenizers library (scripts/make_tokenizer_golden.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "src/model/model.h"
#include "src/tokenizer/byte_level.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace strata {
namespace {

using nlohmann::json;
using testing_util::Escaped;

// 256 byte tokens, then "<|end|>" (control), "<think>" (user-defined), then merges' results.
GgufVocab SmallVocab(const std::string& pre) {
  GgufVocab vocab;
  vocab.model = "gpt2";
  vocab.pre = pre;
  for (int b = 0; b < 256; ++b) {
    vocab.tokens.push_back(ByteLevelEncode(std::string(1, static_cast<char>(b))));
    vocab.token_types.push_back(1);
  }
  vocab.tokens.push_back("<|end|>");
  vocab.token_types.push_back(3);
  vocab.tokens.push_back("<think>");
  vocab.token_types.push_back(4);
  for (const auto& [left, right] : std::vector<std::pair<std::string, std::string>>{
           {"1", "2"}, {"12", "3"}, {"\xC4\xA0", "1"}, {"a", "b"}, {"ab", "c"}}) {
    vocab.merges.push_back(left + " " + right);
    vocab.tokens.push_back(left + right);
    vocab.token_types.push_back(1);
  }
  vocab.tokens.push_back("abcd");  // no merge builds it: only ignore_merges emits it
  vocab.token_types.push_back(1);
  vocab.bos_token_id = 256;
  vocab.eos_token_id = 256;
  return vocab;
}

std::unique_ptr<Tokenizer> Build(const GgufVocab& vocab) {
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGgufVocab(vocab);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

int32_t Id(const Tokenizer& t, const std::string& bytes) {
  const std::vector<int32_t> ids = t.Encode(bytes, false);
  EXPECT_EQ(ids.size(), 1u) << bytes;
  return ids.empty() ? -1 : ids[0];
}

TEST(GgufVocabTest, PreTokenizerNames) {
  std::unique_ptr<Tokenizer> gpt2 = Build(SmallVocab("gpt-2"));
  std::unique_ptr<Tokenizer> smollm = Build(SmallVocab("smollm"));
  std::unique_ptr<Tokenizer> llama3 = Build(SmallVocab("llama-bpe"));
  std::unique_ptr<Tokenizer> unknown = Build(SmallVocab("some-future-model"));
  ASSERT_TRUE(gpt2 && smollm && llama3 && unknown);
  // GPT-2 keeps " 123" as one pre-token; by rank "12" merges first, then "123".
  EXPECT_EQ(gpt2->Encode(" 123", false), (std::vector<int32_t>{Id(*gpt2, " "), Id(*gpt2, "123")}));
  EXPECT_EQ(gpt2->Encode(" 1", false), (std::vector<int32_t>{260}));
  // smollm isolates every digit before the GPT-2 split, so no merge reaches across a digit.
  EXPECT_EQ(smollm->Encode("123", false),
            (std::vector<int32_t>{Id(*smollm, "1"), Id(*smollm, "2"), Id(*smollm, "3")}));
  EXPECT_EQ(smollm->Encode(" 1", false),
            (std::vector<int32_t>{Id(*smollm, " "), Id(*smollm, "1")}));
  // Llama 3 splits digits in threes and emits whole vocabulary words (ignore_merges).
  EXPECT_EQ(llama3->Encode("abcd", false), (std::vector<int32_t>{263}));
  EXPECT_EQ(gpt2->Encode("abcd", false).size(), 2u);
  EXPECT_EQ(unknown->Encode(" 123", false), gpt2->Encode(" 123", false));
  // Tekken emits whole vocabulary words too (ignore_merges) and splits digits one by one.
  std::unique_ptr<Tokenizer> tekken = Build(SmallVocab("tekken"));
  ASSERT_NE(tekken, nullptr);
  EXPECT_EQ(tekken->Encode("abcd", false), (std::vector<int32_t>{263}));
  EXPECT_EQ(tekken->Encode("123", false),
            (std::vector<int32_t>{Id(*tekken, "1"), Id(*tekken, "2"), Id(*tekken, "3")}));
}

// The qwen2_style vocabulary of the BPE goldens as a GGUF file would carry it (tokens by id,
// added tokens as control tokens, merges as "left right"), with llama.cpp's pre-tokenizer "qwen2".
GgufVocab Qwen2StyleVocab() {
  const json j =
      testing_util::ReadJson(testing_util::TokenizerDataPath("qwen2_style/tokenizer.json"));
  GgufVocab vocab;
  vocab.model = "gpt2";
  vocab.pre = "qwen2";
  vocab.tokens.resize(j["model"]["vocab"].size());
  vocab.token_types.assign(vocab.tokens.size(), 1);
  for (const auto& [token, id] : j["model"]["vocab"].items()) {
    vocab.tokens[id.get<size_t>()] = token;
  }
  for (const json& added : j["added_tokens"]) {
    vocab.token_types[added["id"].get<size_t>()] = 3;
  }
  for (const json& merge : j["model"]["merges"]) {
    vocab.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  }
  return vocab;
}

// llama.cpp's "qwen2" split (Llama 3's with single digits, merges applied) against the ids the
// tokenizers library gives for the same vocabulary without its NFC step (`gguf_cases`).
TEST(GgufVocabTest, Qwen2SplitsDigitsOneByOneLikeTheTokenizersLibrary) {
  std::unique_ptr<Tokenizer> qwen2 = Build(Qwen2StyleVocab());
  ASSERT_NE(qwen2, nullptr);
  const json golden =
      testing_util::ReadJson(testing_util::TokenizerDataPath("bpe_golden.json"))["qwen2_style"];
  ASSERT_GT(golden["gguf_cases"].size(), 30u);
  for (const json& c : golden["gguf_cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(qwen2->Encode(text, false), c["ids"].get<std::vector<int32_t>>()) << Escaped(text);
  }
  EXPECT_EQ(qwen2->Encode("12345", false).size(), 5u);
}

TEST(GgufVocabTest, ControlAndUserDefinedTokensMatchLiterally) {
  std::unique_ptr<Tokenizer> t = Build(SmallVocab("gpt-2"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("ab<|end|><think>c", false),
            (std::vector<int32_t>{Id(*t, "ab"), 256, 257, Id(*t, "c")}));
  EXPECT_TRUE(t->IsSpecial(256));
  EXPECT_FALSE(t->IsSpecial(257));
  EXPECT_EQ(t->SpecialTokenId("<think>"), 257);
  EXPECT_EQ(t->Decode({256, 257}, /*skip_special=*/true), "<think>");
  EXPECT_EQ(t->Encode("x", /*add_bos=*/true), (std::vector<int32_t>{256, Id(*t, "x")}));
  EXPECT_FALSE(t->add_bos_by_default());
}

// Without tokenizer.ggml.add_bos_token, llama.cpp (llama_vocab::load) starts a text with BOS for
// SentencePiece vocabularies and for the BPE pre-tokenizers of Llama 3 and Tekken only; the
// file's key, when present, wins.
TEST(GgufVocabTest, BosByDefaultFollowsLlamaCppWhenTheFileIsSilent) {
  for (const auto& [pre, adds] : std::vector<std::pair<std::string, bool>>{{"llama-bpe", true},
                                                                           {"llama3", true},
                                                                           {"pixtral", true},
                                                                           {"tekken", true},
                                                                           {"smollm", false},
                                                                           {"qwen2", false},
                                                                           {"gpt-2", false},
                                                                           {"default", false}}) {
    GgufVocab vocab = SmallVocab(pre);
    std::unique_ptr<Tokenizer> t = Build(vocab);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->add_bos_by_default(), adds) << pre;
    vocab.add_bos = !adds;
    t = Build(vocab);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->add_bos_by_default(), !adds) << pre << ", key " << !adds;
  }
}

TEST(GgufVocabTest, Errors) {
  GgufVocab vocab = SmallVocab("gpt-2");
  vocab.model = "t5";  // a unigram vocabulary
  Result<std::unique_ptr<Tokenizer>> t = Tokenizer::FromGgufVocab(vocab);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(t.status().message().find("'t5'"), std::string::npos);

  vocab = SmallVocab("gpt-2");
  vocab.merges.push_back("zz q");
  t = Tokenizer::FromGgufVocab(vocab);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(t.status().message().find("merge"), std::string::npos);

  vocab = SmallVocab("gpt-2");
  vocab.merges.push_back("nospace");
  EXPECT_EQ(Tokenizer::FromGgufVocab(vocab).status().code(), StatusCode::kCorrupt);

  vocab = SmallVocab("gpt-2");
  vocab.token_types.pop_back();
  EXPECT_EQ(Tokenizer::FromGgufVocab(vocab).status().code(), StatusCode::kCorrupt);

  vocab = SmallVocab("gpt-2");
  vocab.bos_token_id = 100000;
  EXPECT_EQ(Tokenizer::FromGgufVocab(vocab).status().code(), StatusCode::kInvalidArgument);
}

std::string DefaultModelPath() {
  std::string cache;
  if (const char* env = std::getenv("STRATA_CACHE"); env != nullptr && *env != '\0') {
    cache = env;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    cache = std::string(xdg) + "/strata";
  } else {
    const char* home = std::getenv("HOME");
    cache = std::string(home != nullptr ? home : "") + "/.cache/strata";
  }
  return cache + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class SmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(DefaultModelPath())) return;
    Result<std::unique_ptr<Model>> model = LoadModel(DefaultModelPath());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    Result<std::unique_ptr<Tokenizer>> tokenizer =
        Tokenizer::FromGgufVocab(ToGgufVocab((*model)->gguf_tokenizer()));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(tokenizer).value().release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << "default model not found at " << DefaultModelPath();
    golden_ = testing_util::ReadJson(testing_util::TokenizerDataPath("smollm2_golden.json"));
  }
  static Tokenizer* tokenizer_;
  json golden_;
};

Tokenizer* SmolLm2Test::tokenizer_ = nullptr;

// strata follows llama.cpp's "smollm" pre-tokenizer; transformers' GGUF conversion drops its
// digit split, which shows on the strings listed in transformers_disagrees_on.
TEST_F(SmolLm2Test, EncodesLikeLlamaCppSmollm) {
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << Escaped(text);
    EXPECT_EQ(tokenizer_->Decode(ids, false), c["decoded"].get<std::string>()) << Escaped(text);
    EXPECT_EQ(tokenizer_->Decode(ids, false), text) << Escaped(text);
  }
}

TEST_F(SmolLm2Test, DefaultsMatchTransformers) {
  EXPECT_EQ(tokenizer_->vocab_size(), golden_["vocab_size"].get<int>());
  EXPECT_EQ(tokenizer_->bos_id(), golden_["bos_id"].get<int>());
  EXPECT_EQ(tokenizer_->eos_id(), golden_["eos_id"].get<int>());
  EXPECT_EQ(tokenizer_->add_bos_by_default(), golden_["add_bos_by_default"].get<bool>());
  for (const json& c : golden_["cases"]) {
    const std::string text = c["text"];
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    // What transformers' default encode adds (nothing for SmolLM2) is what strata adds.
    const auto& plain = c["transformers_gguf_ids"];
    const auto& with_defaults = c["transformers_default_ids"];
    EXPECT_EQ(with_defaults.size() - plain.size(),
              tokenizer_->Encode(text, tokenizer_->add_bos_by_default()).size() - ids.size());
  }
  EXPECT_EQ(tokenizer_->SpecialTokenId("<|im_end|>"), 2);
  EXPECT_TRUE(tokenizer_->IsSpecial(2));
}

}  // namespace
}  // namespace strata
