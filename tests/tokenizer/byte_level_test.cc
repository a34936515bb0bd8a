#include "src/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace strata {
namespace {

TEST(ByteLevelTest, KnownSpellings) {
  EXPECT_EQ(ByteLevelEncode(" hello"), "\xC4\xA0hello");       // Ġhello
  EXPECT_EQ(ByteLevelEncode("\n"), "\xC4\x8A");                // Ċ
  EXPECT_EQ(ByteLevelEncode("\t"), "\xC4\x89");                // ĉ
  EXPECT_EQ(ByteLevelEncode("\xC3\xA9"), "\xC3\x83\xC2\xA9");  // é -> Ã©
  EXPECT_EQ(ByteLevelDecode("\xC4\xA0world"), " world");
}

TEST(ByteLevelTest, AllBytesRoundTripThroughDistinctCharacters) {
  std::set<std::string> spellings;
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const std::string spelling = ByteLevelEncode(byte);
    spellings.insert(spelling);
    EXPECT_EQ(ByteLevelDecode(spelling), byte) << b;
  }
  EXPECT_EQ(spellings.size(), 256u);
}

TEST(ByteLevelTest, RejectsCharactersOutsideTheAlphabet) {
  EXPECT_FALSE(ByteLevelDecode("a b").has_value());           // a literal space
  EXPECT_FALSE(ByteLevelDecode("\xE4\xB8\xAD").has_value());  // 中
  EXPECT_FALSE(ByteLevelDecode("\xFF").has_value());          // not UTF-8
  EXPECT_EQ(ByteLevelDecode(""), "");
}

}  // namespace
}  // namespace strata
