// Regex: an owned, compiled PCRE2 pattern for the pre-tokenizers. Patterns are compiled with
// PCRE2_UTF | PCRE2_UCP (so \s, \w, \p{L} and \p{N} are Unicode-aware, as in Hugging Face
// tokenizers' Oniguruma patterns) and JIT-compiled when the library supports it. Subjects may hold
// invalid UTF-8 (PCRE2_MATCH_INVALID_UTF): ill-formed bytes never match any pattern item, so they
// land in the gaps between matches and are still encoded byte by byte. Thread-safe: every call
// allocates its own match data.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/status.h"

struct pcre2_real_code_8;  // pcre2_code in <pcre2.h>, kept out of this header

namespace strata {

class Regex {
 public:
  // Compiles `pattern`, or matches `pattern` as plain text when `literal`. An invalid pattern
  // gives InvalidArgument naming PCRE2's error and the offset where it was found.
  static Result<Regex> Compile(std::string_view pattern, bool literal = false);

  // [begin, end) byte offsets of the successive non-overlapping, non-empty matches in `subject`,
  // left to right. Should PCRE2 give up (a match or depth limit), the rest of the subject counts
  // as unmatched and a warning is logged.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view subject) const;

  // Whether the pattern matches `subject` starting exactly at byte `pos` (anchored there; the
  // bytes before `pos` are visible to lookbehinds). REQUIRES: pos <= subject.size().
  bool MatchesAt(std::string_view subject, size_t pos) const;

 private:
  struct CodeDeleter {
    void operator()(pcre2_real_code_8* code) const;
  };
  explicit Regex(pcre2_real_code_8* code) : code_(code) {}

  std::unique_ptr<pcre2_real_code_8, CodeDeleter> code_;
};

}  // namespace strata
