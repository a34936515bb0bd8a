#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/utf8.h"
#include "tests/tokenizer/test_util.h"

namespace strata {
namespace {

using testing_util::Escaped;

class StreamingDetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Tokenizer>> t =
        Tokenizer::FromJsonFile(testing_util::TokenizerDataPath("gpt2_style/tokenizer.json"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = std::move(t).value();
  }

  // Pushes the ids of `text` one at a time; every piece must be whole UTF-8.
  std::string Stream(const std::vector<int32_t>& ids, bool skip_special, int* held_pushes) {
    StreamingDetokenizer detokenizer(*tokenizer_, skip_special);
    std::string out;
    *held_pushes = 0;
    for (int32_t id : ids) {
      const std::string piece = detokenizer.Push(id);
      EXPECT_EQ(SanitizeUtf8(piece), piece) << Escaped(piece);
      if (piece.empty()) ++*held_pushes;
      out += piece;
    }
    return out + detokenizer.Finish();
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(StreamingDetokenizerTest, HoldsCharactersSplitAcrossTokens) {
  for (const std::string text : {"👩‍👩‍👧 🎉", "日本語のテキスト", "中文",
                                 "emoji👍🏽mixed🇫🇷flags", "café naïve résumé"}) {
    int held = 0;
    EXPECT_EQ(Stream(tokenizer_->Encode(text, false), false, &held), text) << Escaped(text);
    // One token per byte splits every multi-byte character across tokens.
    std::vector<int32_t> byte_ids;
    for (char byte : text) {
      const std::vector<int32_t> ids = tokenizer_->Encode(std::string(1, byte), false);
      ASSERT_EQ(ids.size(), 1u);
      byte_ids.push_back(ids[0]);
    }
    EXPECT_EQ(Stream(byte_ids, false, &held), text) << Escaped(text);
    EXPECT_GT(held, 0);
  }
}

TEST_F(StreamingDetokenizerTest, SpecialTokens) {
  const std::vector<int32_t> ids = tokenizer_->Encode("<|im_start|>user\nhi<|im_end|>", false);
  int held = 0;
  EXPECT_EQ(Stream(ids, /*skip_special=*/false, &held), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(Stream(ids, /*skip_special=*/true, &held), "user\nhi");
}

TEST_F(StreamingDetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  // A stray byte is replaced at once; a cut-off character only at Finish().
  const std::vector<int32_t> ids = tokenizer_->Encode(
      "a\xFF"
      "b\xE4\xB8",
      false);
  StreamingDetokenizer detokenizer(*tokenizer_, false);
  std::string out;
  for (int32_t id : ids) out += detokenizer.Push(id);
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(detokenizer.Finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(detokenizer.Finish(), "");
}

TEST_F(StreamingDetokenizerTest, IdsOutsideTheVocabularyAddNothing) {
  StreamingDetokenizer detokenizer(*tokenizer_, false);
  EXPECT_EQ(detokenizer.Push(-1), "");
  EXPECT_EQ(detokenizer.Push(tokenizer_->vocab_size()), "");
  EXPECT_EQ(detokenizer.Finish(), "");
}

}  // namespace
}  // namespace strata
