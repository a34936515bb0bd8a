#define PCRE2_CODE_UNIT_WIDTH 8
#include "src/tokenizer/regex.h"

#include <pcre2.h>

#include "src/core/log.h"

namespace strata {
namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

// One pcre2_match call; returns PCRE2's code and sets the match bounds on success.
int MatchOnce(const pcre2_code* code, pcre2_match_data* data, std::string_view subject,
              size_t offset, bool anchored, size_t* begin, size_t* end) {
  const auto subject_ptr = reinterpret_cast<PCRE2_SPTR>(subject.data());
  const uint32_t options = anchored ? PCRE2_ANCHORED : 0;
  int rc = pcre2_match(code, subject_ptr, subject.size(), offset, options, data, nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    // The JIT's fixed stack is the usual culprit; the interpreter keeps its frames on the heap.
    rc = pcre2_match(code, subject_ptr, subject.size(), offset, options | PCRE2_NO_JIT, data,
                     nullptr);
  }
  if (rc >= 0) {
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    *begin = ovector[0];
    *end = ovector[1];
  }
  return rc;
}

}  // namespace

void Regex::CodeDeleter::operator()(pcre2_code* code) const { pcre2_code_free(code); }

Result<Regex> Regex::Compile(std::string_view pattern, bool literal) {
  // PCRE2 refuses UCP with LITERAL; a literal has no classes for it to affect anyway.
  const uint32_t options =
      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return Status::InvalidArgument("invalid regex '" + std::string(pattern) + "' at offset " +
                                   std::to_string(error_offset) + ": " +
                                   reinterpret_cast<const char*>(message));
  }
  // Without JIT support pcre2_match falls back to the interpreter on its own.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Regex(code);
}

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> matches;
  const MatchData data(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  size_t offset = 0;
  while (offset < subject.size()) {
    size_t begin = 0, end = 0;
    const int rc =
        MatchOnce(code_.get(), data.get(), subject, offset, /*anchored=*/false, &begin, &end);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      LogWarn("tokenizer: regex matching stopped (PCRE2 error " + std::to_string(rc) +
              "); the remaining " + std::to_string(subject.size() - offset) +
              " bytes are kept as one piece");
      break;
    }
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // An empty match splits nothing; step over one character (or one stray byte).
      offset = begin + 1;
      while (offset < subject.size() && (static_cast<uint8_t>(subject[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
    }
  }
  return matches;
}

bool Regex::MatchesAt(std::string_view subject, size_t pos) const {
  const MatchData data(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  size_t begin = 0, end = 0;
  return MatchOnce(code_.get(), data.get(), subject, pos, /*anchored=*/true, &begin, &end) >= 0;
}

}  // namespace strata
