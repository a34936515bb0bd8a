#include "src/tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <utility>

#include "src/tokenizer/regex.h"

namespace strata {
namespace {

using Pieces = std::vector<std::string>;

PreTokenizer SplitOn(std::string_view pattern, SplitBehavior behavior, bool invert = false) {
  Result<Regex> regex = Regex::Compile(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status().ToString();
  PreTokenizer pre;
  pre.AddSplit(std::move(regex).value(), behavior, invert);
  return pre;
}

TEST(RegexTest, InvalidPatternIsAnError) {
  Result<Regex> regex = Regex::Compile("(unclosed");
  ASSERT_FALSE(regex.ok());
  EXPECT_EQ(regex.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(regex.status().message().find("invalid regex"), std::string::npos);
}

TEST(RegexTest, LiteralPatternMatchesText) {
  Result<Regex> regex = Regex::Compile("a.b", /*literal=*/true);
  ASSERT_TRUE(regex.ok());
  const auto matches = regex->FindAll("axb a.b");
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0], std::make_pair(size_t{4}, size_t{7}));
}

TEST(RegexTest, InvalidUtf8NeverMatchesAndDoesNotStopMatching) {
  Result<Regex> regex = Regex::Compile(kGpt2SplitPattern);
  ASSERT_TRUE(regex.ok());
  const std::string text =
      "ab\xFF"
      "cd \xE4\xB8 ef\xF0\x9F";
  const auto matches = regex->FindAll(text);
  Pieces pieces;
  for (const auto& [begin, end] : matches) pieces.push_back(text.substr(begin, end - begin));
  EXPECT_EQ(pieces, (Pieces{"ab", "cd", " ", " ef"}));
}

TEST(PreTokenizerTest, Gpt2Split) {
  PreTokenizer pre;
  ASSERT_TRUE(pre.AddByteLevel(/*add_prefix_space=*/false, /*use_regex=*/true).ok());
  EXPECT_EQ(pre.Run("Hello world  !!\n\n x"),
            (Pieces{"Hello", " world", " ", " !!", "\n\n", " x"}));
  EXPECT_EQ(pre.Run("don't 12345 I'LL"), (Pieces{"don", "'t", " 12345", " I", "'", "LL"}));
  EXPECT_EQ(pre.Run("trailing  "), (Pieces{"trailing", "  "}));
  EXPECT_TRUE(pre.Run("").empty());
}

TEST(PreTokenizerTest, Llama3Split) {
  PreTokenizer pre = SplitOn(kLlama3SplitPattern, SplitBehavior::kIsolated);
  EXPECT_EQ(pre.Run("I'LL don't 12345"), (Pieces{"I", "'LL", " don", "'t", " ", "123", "45"}));
  EXPECT_EQ(pre.Run("a.\n\nb"), (Pieces{"a", ".\n\n", "b"}));
}

// Mistral's Tekken split; the pieces are what Hugging Face tokenizers' Split (isolated) gives for
// the same pattern (tokenizers 0.23.3).
TEST(PreTokenizerTest, TekkenSplit) {
  PreTokenizer pre = SplitOn(kTekkenSplitPattern, SplitBehavior::kIsolated);
  EXPECT_EQ(pre.Run("HelloWorld IOStream 2024"),
            (Pieces{"Hello", "World", " IOStream", " ", "2", "0", "2", "4"}));
  EXPECT_EQ(pre.Run(" path/to/file.txt\n"), (Pieces{" path", "/to", "/file", ".txt", "\n"}));
  EXPECT_EQ(pre.Run("don't STOP l'\xC3\xA9t\xC3\xA9"),
            (Pieces{"don", "'t", " STOP", " l", "'\xC3\xA9t\xC3\xA9"}));
  EXPECT_EQ(pre.Run("x  123 y\t\t456"),
            (Pieces{"x", " ", " ", "1", "2", "3", " y", "\t", "\t", "4", "5", "6"}));
}

TEST(PreTokenizerTest, InvalidUtf8BytesBecomePieces) {
  PreTokenizer pre;
  ASSERT_TRUE(pre.AddByteLevel(false, true).ok());
  EXPECT_EQ(pre.Run("ab\xFF"
                    "cd"),
            (Pieces{"ab", "\xFF", "cd"}));
}

TEST(PreTokenizerTest, SplitBehaviors) {
  const std::string text = "a-b--c";
  EXPECT_EQ(SplitOn("-", SplitBehavior::kIsolated).Run(text),
            (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(SplitOn("-", SplitBehavior::kRemoved).Run(text), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(SplitOn("-", SplitBehavior::kMergedWithPrevious).Run(text),
            (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(SplitOn("-", SplitBehavior::kMergedWithNext).Run(text), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(SplitOn("-", SplitBehavior::kContiguous).Run(text), (Pieces{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(SplitOn("-", SplitBehavior::kRemoved, /*invert=*/true).Run(text),
            (Pieces{"-", "-", "-"}));
}

TEST(PreTokenizerTest, PrefixSpaceAndDigits) {
  PreTokenizer prefix;
  ASSERT_TRUE(prefix.AddByteLevel(/*add_prefix_space=*/true, /*use_regex=*/false).ok());
  EXPECT_EQ(prefix.Run("hi"), (Pieces{" hi"}));
  EXPECT_EQ(prefix.Run(" hi"), (Pieces{" hi"}));
  EXPECT_TRUE(prefix.Run("").empty());

  PreTokenizer individual;
  ASSERT_TRUE(individual.AddDigits(true).ok());
  EXPECT_EQ(individual.Run("a12b3\xC2\xB2"), (Pieces{"a", "1", "2", "b", "3", "\xC2\xB2"}));
  PreTokenizer runs;
  ASSERT_TRUE(runs.AddDigits(false).ok());
  EXPECT_EQ(runs.Run("a12b3"), (Pieces{"a", "12", "b", "3"}));
}

}  // namespace
}  // namespace strata
