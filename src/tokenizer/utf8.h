// UTF-8 scanning for the tokenizer: classifying byte sequences, lossy repair and the Unicode
// White_Space property. Input may be any bytes; nothing here reads past the given view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

enum class Utf8Kind {
  kValid,      // a well-formed character
  kTruncated,  // a well-formed prefix of a character cut off by the end of the input
  kInvalid,    // an ill-formed sequence
};

struct Utf8Char {
  Utf8Kind kind;
  int length;          // bytes: 1-4 for kValid; bytes present for kTruncated; the maximal
                       // subpart (>= 1) for kInvalid, which one U+FFFD replaces
  uint32_t codepoint;  // meaningful only for kValid
};

// Classifies the bytes of `s` starting at `pos`. REQUIRES: pos < s.size().
Utf8Char NextUtf8Char(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of `codepoint`. REQUIRES: codepoint <= 0x10FFFF.
void AppendUtf8(uint32_t codepoint, std::string* out);

// Whether `codepoint` has the Unicode White_Space property (Rust's char::is_whitespace).
bool IsUnicodeWhitespace(uint32_t codepoint);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace strata
