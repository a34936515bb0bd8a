#include "src/tokenizer/added_tokens.h"

#include <algorithm>
#include <utility>

#include "src/tokenizer/utf8.h"

namespace strata {
namespace {

// Start of the character that ends just before `pos`, or pos - 1 for a stray byte.
size_t PreviousCharStart(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && pos - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  const Utf8Char c = NextUtf8Char(text, start);
  return c.kind == Utf8Kind::kValid && start + c.length == pos ? start : pos - 1;
}

bool IsWhitespaceAt(std::string_view text, size_t pos, size_t* length) {
  const Utf8Char c = NextUtf8Char(text, pos);
  *length = c.length;
  return c.kind == Utf8Kind::kValid && IsUnicodeWhitespace(c.codepoint);
}

}  // namespace

Result<AddedTokenMatcher> AddedTokenMatcher::Create(std::vector<AddedToken> tokens) {
  AddedTokenMatcher matcher;
  matcher.tokens_ = std::move(tokens);
  bool any_single_word = false;
  for (size_t i = 0; i < matcher.tokens_.size(); ++i) {
    const AddedToken& token = matcher.tokens_[i];
    Pass& pass = token.normalized ? matcher.normalized_ : matcher.non_normalized_;
    pass.by_first_byte[static_cast<uint8_t>(token.content[0])].push_back(static_cast<int>(i));
    pass.empty = false;
    any_single_word |= token.single_word;
  }
  for (Pass* pass : {&matcher.non_normalized_, &matcher.normalized_}) {
    for (std::vector<int>& bucket : pass->by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int b) {
        return matcher.tokens_[a].content.size() > matcher.tokens_[b].content.size();
      });
    }
  }
  if (any_single_word) {
    // The \w of Rust's regex crate, which tokenizers uses here: unlike PCRE2's \w it leaves out
    // numbers other than decimal digits (², ½).
    STRATA_ASSIGN_OR_RETURN(Regex word_char,
                            Regex::Compile(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])"));
    matcher.word_char_ = std::move(word_char);
  }
  return matcher;
}

bool AddedTokenMatcher::IsWordCharBefore(std::string_view text, size_t pos) const {
  return pos > 0 && word_char_->MatchesAt(text, PreviousCharStart(text, pos));
}

bool AddedTokenMatcher::IsWordCharAt(std::string_view text, size_t pos) const {
  return pos < text.size() && word_char_->MatchesAt(text, pos);
}

const AddedToken* AddedTokenMatcher::LongestAt(const Pass& pass, std::string_view text,
                                               size_t pos) const {
  for (int index : pass.by_first_byte[static_cast<uint8_t>(text[pos])]) {
    if (text.substr(pos).starts_with(tokens_[index].content)) return &tokens_[index];
  }
  return nullptr;
}

void AddedTokenMatcher::SplitPass(const Pass& pass, std::string_view text,
                                  std::vector<TextPiece>* out) const {
  size_t text_start = 0;  // start of the text not yet emitted
  size_t scan = 0;
  while (scan < text.size()) {
    // Leftmost-longest occurrence at or after `scan`.
    size_t start = scan;
    const AddedToken* found = nullptr;
    while (start < text.size() && (found = LongestAt(pass, text, start)) == nullptr) ++start;
    if (found == nullptr) break;
    size_t stop = start + found->content.size();
    scan = stop;
    if (found->single_word && (IsWordCharBefore(text, start) || IsWordCharAt(text, stop))) {
      continue;
    }
    if (found->lstrip) {
      while (start > text_start) {
        const size_t previous = PreviousCharStart(text, start);
        size_t length = 0;
        if (!IsWhitespaceAt(text, previous, &length)) break;
        start = previous;
      }
    }
    if (found->rstrip) {
      size_t length = 0;
      while (stop < text.size() && IsWhitespaceAt(text, stop, &length)) stop += length;
      scan = stop;
    }
    if (start > text_start) out->push_back({text.substr(text_start, start - text_start), -1});
    out->push_back({text.substr(start, stop - start), found->id});
    text_start = stop;
  }
  if (text_start < text.size()) out->push_back({text.substr(text_start), -1});
}

std::vector<TextPiece> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextPiece> first;
  if (non_normalized_.empty) {
    if (!text.empty()) first.push_back({text, -1});
  } else {
    SplitPass(non_normalized_, text, &first);
  }
  if (normalized_.empty) return first;
  std::vector<TextPiece> pieces;
  for (const TextPiece& piece : first) {
    if (piece.token_id >= 0) {
      pieces.push_back(piece);
    } else {
      SplitPass(normalized_, piece.text, &pieces);
    }
  }
  return pieces;
}

}  // namespace strata
