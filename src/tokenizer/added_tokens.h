// AddedTokenMatcher: finds a tokenizer's added tokens (special tokens such as "<|im_start|>" and
// user-defined ones) literally in input text before pre-tokenization, as Hugging Face tokenizers'
// AddedVocabulary does with the default split_special_tokens=False.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"
#include "src/tokenizer/regex.h"

namespace strata {

// One added token, with tokenizer.json's flags (GGUF control and user-defined tokens use the
// defaults).
struct AddedToken {
  int32_t id = -1;
  std::string content;       // the literal text; never empty
  bool special = false;      // left out by Decode(skip_special)
  bool lstrip = false;       // also swallows the whitespace on its left
  bool rstrip = false;       // also swallows the whitespace on its right
  bool single_word = false;  // matches only where no word character touches it
  bool normalized = false;   // matched in a second pass, on the text between first-pass tokens
};

// A run of input: an added token (with the text it covers) or plain text for the pre-tokenizer.
struct TextPiece {
  std::string_view text;
  int32_t token_id = -1;  // -1 for plain text
};

// Thread-safe after construction.
class AddedTokenMatcher {
 public:
  // REQUIRES: every token has non-empty content.
  static Result<AddedTokenMatcher> Create(std::vector<AddedToken> tokens);

  // Cuts `text` into plain text and added tokens. Each pass scans left to right for the
  // leftmost-longest occurrence of its tokens (non-normalized tokens first, then normalized ones
  // inside the remaining text); an occurrence that fails its single_word test is left as text and
  // the scan resumes after it. The pieces cover `text` in order and none is empty.
  std::vector<TextPiece> Split(std::string_view text) const;

 private:
  struct Pass {
    // Indices into tokens_ by the first byte of their content, longest first.
    std::array<std::vector<int>, 256> by_first_byte;
    bool empty = true;
  };

  // The longest token of `pass` starting at byte `pos`, or nullptr.
  const AddedToken* LongestAt(const Pass& pass, std::string_view text, size_t pos) const;
  void SplitPass(const Pass& pass, std::string_view text, std::vector<TextPiece>* out) const;
  bool IsWordCharBefore(std::string_view text, size_t pos) const;
  bool IsWordCharAt(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  Pass non_normalized_, normalized_;
  std::optional<Regex> word_char_;  // \w, compiled only when a token is single_word
};

}  // namespace strata
