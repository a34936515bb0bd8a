#include "src/tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include <utility>

namespace strata {
namespace {

using Pieces = std::vector<std::pair<std::string, int32_t>>;

Pieces SplitWith(std::vector<AddedToken> tokens, std::string_view text) {
  Result<AddedTokenMatcher> matcher = AddedTokenMatcher::Create(std::move(tokens));
  EXPECT_TRUE(matcher.ok());
  Pieces pieces;
  for (const TextPiece& piece : matcher->Split(text)) {
    pieces.emplace_back(std::string(piece.text), piece.token_id);
  }
  return pieces;
}

AddedToken Token(int32_t id, std::string content) {
  AddedToken token;
  token.id = id;
  token.content = std::move(content);
  token.special = true;
  return token;
}

TEST(AddedTokenMatcherTest, LeftmostLongest) {
  const std::vector<AddedToken> tokens = {Token(1, "<|a|>"), Token(2, "<|a|><|b|>"),
                                          Token(3, "<|b|>")};
  EXPECT_EQ(SplitWith(tokens, "x<|a|><|b|>y<|b|><|a|"),
            (Pieces{{"x", -1}, {"<|a|><|b|>", 2}, {"y", -1}, {"<|b|>", 3}, {"<|a|", -1}}));
  EXPECT_EQ(SplitWith(tokens, ""), Pieces{});
  EXPECT_EQ(SplitWith({}, "plain"), (Pieces{{"plain", -1}}));
}

TEST(AddedTokenMatcherTest, StripFlagsSwallowWhitespace) {
  AddedToken left = Token(1, "<mask>");
  left.lstrip = true;
  AddedToken right = Token(2, "<sep>");
  right.rstrip = true;
  EXPECT_EQ(SplitWith({left, right}, "a \t<mask> b<sep>\n c"),
            (Pieces{{"a", -1}, {" \t<mask>", 1}, {" b", -1}, {"<sep>\n ", 2}, {"c", -1}}));
}

TEST(AddedTokenMatcherTest, SingleWordNeedsWordBoundaries) {
  AddedToken cat = Token(7, "cat");
  cat.single_word = true;
  cat.special = false;
  EXPECT_EQ(SplitWith({cat}, "cat bobcat cats (cat)"),
            (Pieces{{"cat", 7}, {" bobcat cats (", -1}, {"cat", 7}, {")", -1}}));
  // As in Rust's regex \w: digits and underscores touch a word, other numbers (²) do not.
  EXPECT_EQ(SplitWith({cat}, "cat2 _cat cat\xC2\xB2"),
            (Pieces{{"cat2 _cat ", -1}, {"cat", 7}, {"\xC2\xB2", -1}}));
}

TEST(AddedTokenMatcherTest, NormalizedTokensMatchAfterOthers) {
  AddedToken longer = Token(1, "abc");
  longer.normalized = true;
  const AddedToken shorter = Token(2, "ab");
  // The non-normalized pass runs first, so "ab" wins although "abc" is longer.
  EXPECT_EQ(SplitWith({longer, shorter}, "abc abc"),
            (Pieces{{"ab", 2}, {"c ", -1}, {"ab", 2}, {"c", -1}}));
}

}  // namespace
}  // namespace strata
