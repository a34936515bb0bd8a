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

  // Whether `s` is nothing but well-formed characters.
  static bool WholeUtf8(std::string_view s) {
    for (size_t pos = 0; pos < s.size();) {
      const Utf8Char c = NextUtf8Char(s, pos);
      if (c.kind != Utf8Kind::kValid) return false;
      pos += c.length;
    }
    return true;
  }

  // Pushes the ids of `text` one at a time; every piece must be whole UTF-8.
  std::string Stream(const std::vector<int32_t>& ids, bool skip_special, int* held_pushes) {
    StreamingDetokenizer detokenizer(*tokenizer_, skip_special);
    std::string out;
    *held_pushes = 0;
    for (int32_t id : ids) {
      const std::string piece = detokenizer.Push(id);
      EXPECT_TRUE(WholeUtf8(piece)) << Escaped(piece);
      if (piece.empty()) ++*held_pushes;
      out += piece;
    }
    detokenizer.Finish();
    return out;
  }

  // One id per byte of `text`.
  std::vector<int32_t> ByteIds(const std::string& text) {
    std::vector<int32_t> ids;
    for (char byte : text) {
      const std::vector<int32_t> one = tokenizer_->Encode(std::string(1, byte), false);
      EXPECT_EQ(one.size(), 1u);
      ids.push_back(one.at(0));
    }
    return ids;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(StreamingDetokenizerTest, HoldsCharactersSplitAcrossTokens) {
  for (const std::string text : {"👩‍👩‍👧 🎉", "日本語のテキスト", "中文",
                                 "emoji👍🏽mixed🇫🇷flags", "café naïve résumé"}) {
    int held = 0;
    EXPECT_EQ(Stream(tokenizer_->Encode(text, false), false, &held), text) << Escaped(text);
    // One token per byte splits every multi-byte character across tokens.
    EXPECT_EQ(Stream(ByteIds(text), false, &held), text) << Escaped(text);
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
  // A stray byte is replaced at once; so is a character that the next byte cuts off.
  const std::vector<int32_t> ids = tokenizer_->Encode(
      "a\xFF"
      "b\xE4\xB8"
      "c",
      false);
  StreamingDetokenizer detokenizer(*tokenizer_, false);
  std::string out;
  for (int32_t id : ids) out += detokenizer.Push(id);
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c");
}

// A stream that ends inside a character (a reply cut by max_tokens) ends at the last whole one:
// the cut-off bytes are dropped at Finish(), never replaced by U+FFFD.
TEST_F(StreamingDetokenizerTest, FinishDropsACharacterCutOffByTheEnd) {
  const std::string text =
      "a\xC3\xA9"          // é, 2 bytes
      "\xE6\x97\xA5"       // 日, 3 bytes
      "\xF0\x9F\x8E\x89";  // 🎉, 4 bytes
  const std::vector<int32_t> ids = ByteIds(text);
  const size_t whole[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10};  // bytes of whole characters
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    int held = 0;
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<long>(cut));
    EXPECT_EQ(Stream(prefix, false, &held), text.substr(0, whole[cut])) << "cut after " << cut;
  }
  // What Finish() dropped does not reach the next stream: the continuation bytes of 日 alone
  // are ill-formed.
  StreamingDetokenizer detokenizer(*tokenizer_, false);
  EXPECT_EQ(detokenizer.Push(ids[3]), "");  // \xE6
  detokenizer.Finish();
  EXPECT_EQ(detokenizer.Push(ids[4]), "\xEF\xBF\xBD");
  EXPECT_EQ(detokenizer.Push(ids[5]), "\xEF\xBF\xBD");
  EXPECT_EQ(detokenizer.Push(ids[3]), "");
  EXPECT_EQ(detokenizer.Push(ids[4]), "");
  EXPECT_EQ(detokenizer.Push(ids[5]), "\xE6\x97\xA5");
}

TEST_F(StreamingDetokenizerTest, IdsOutsideTheVocabularyAddNothing) {
  StreamingDetokenizer detokenizer(*tokenizer_, false);
  EXPECT_EQ(detokenizer.Push(-1), "");
  EXPECT_EQ(detokenizer.Push(tokenizer_->vocab_size()), "");
  EXPECT_EQ(detokenizer.Push(tokenizer_->Encode("a", false).at(0)), "a");
}

}  // namespace
}  // namespace strata
