#include "src/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(Utf8Test, ClassifiesValidCharacters) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x8E\x89";  // a é 中 🎉
  Utf8Char c = NextUtf8Char(text, 0);
  EXPECT_EQ(c.kind, Utf8Kind::kValid);
  EXPECT_EQ(c.codepoint, 'a');
  c = NextUtf8Char(text, 1);
  EXPECT_EQ(c.length, 2);
  EXPECT_EQ(c.codepoint, 0xE9u);
  c = NextUtf8Char(text, 3);
  EXPECT_EQ(c.length, 3);
  EXPECT_EQ(c.codepoint, 0x4E2Du);
  c = NextUtf8Char(text, 6);
  EXPECT_EQ(c.length, 4);
  EXPECT_EQ(c.codepoint, 0x1F389u);
}

TEST(Utf8Test, TruncatedAndInvalid) {
  EXPECT_EQ(NextUtf8Char("\xF0\x9F\x8E", 0).kind, Utf8Kind::kTruncated);
  EXPECT_EQ(NextUtf8Char("\xF0\x9F\x8E", 0).length, 3);
  EXPECT_EQ(NextUtf8Char("\x80", 0).kind, Utf8Kind::kInvalid);
  EXPECT_EQ(NextUtf8Char("\xC0\xAF", 0).kind, Utf8Kind::kInvalid);          // overlong
  EXPECT_EQ(NextUtf8Char("\xED\xA0\x80", 0).kind, Utf8Kind::kInvalid);      // surrogate
  EXPECT_EQ(NextUtf8Char("\xF4\x90\x80\x80", 0).kind, Utf8Kind::kInvalid);  // > U+10FFFF
  // A valid lead byte followed by a non-continuation: the maximal subpart is the lead alone.
  EXPECT_EQ(NextUtf8Char("\xE4"
                         "a",
                         0)
                .length,
            1);
  EXPECT_EQ(NextUtf8Char("\xE4\xB8"
                         "a",
                         0)
                .length,
            2);
}

TEST(Utf8Test, AppendAndWhitespace) {
  std::string out;
  for (uint32_t cp : {0x41u, 0xE9u, 0x4E2Du, 0x1F389u}) AppendUtf8(cp, &out);
  EXPECT_EQ(out, "A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x8E\x89");
  EXPECT_TRUE(IsUnicodeWhitespace(' '));
  EXPECT_TRUE(IsUnicodeWhitespace(0x3000));
  EXPECT_TRUE(IsUnicodeWhitespace(0x85));
  EXPECT_FALSE(IsUnicodeWhitespace(0x200B));  // zero width space is not White_Space
  EXPECT_FALSE(IsUnicodeWhitespace('x'));
}

}  // namespace
}  // namespace strata
