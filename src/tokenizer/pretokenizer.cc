#include "src/tokenizer/pretokenizer.h"

#include <utility>

namespace strata {
namespace {

struct Span {
  size_t begin, end;
  bool is_match;
};

// The pieces of a split, following tokenizers' NormalizedString::split fold for each behaviour.
std::vector<Span> ApplyBehavior(const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      return spans;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
  }
  return out;
}

}  // namespace

void PreTokenizer::AddSplit(Regex pattern, SplitBehavior behavior, bool invert) {
  steps_.push_back(Step{std::move(pattern), behavior, invert});
}

Status PreTokenizer::AddByteLevel(bool add_prefix_space, bool use_regex) {
  if (add_prefix_space) steps_.push_back(Step{});
  if (use_regex) {
    STRATA_ASSIGN_OR_RETURN(Regex pattern, Regex::Compile(kGpt2SplitPattern));
    AddSplit(std::move(pattern), SplitBehavior::kIsolated, /*invert=*/false);
  }
  return Status::Ok();
}

Status PreTokenizer::AddDigits(bool individual_digits) {
  STRATA_ASSIGN_OR_RETURN(Regex pattern,
                          Regex::Compile(individual_digits ? R"(\p{N})" : R"(\p{N}+)"));
  AddSplit(std::move(pattern), SplitBehavior::kIsolated, /*invert=*/false);
  return Status::Ok();
}

void PreTokenizer::ApplySplit(const Step& step, const std::string& piece,
                              std::vector<std::string>* out) {
  std::vector<Span> spans;
  size_t previous_end = 0;
  for (const auto& [begin, end] : step.pattern->FindAll(piece)) {
    if (begin > previous_end) spans.push_back({previous_end, begin, step.invert});
    spans.push_back({begin, end, !step.invert});
    previous_end = end;
  }
  if (previous_end < piece.size()) spans.push_back({previous_end, piece.size(), step.invert});
  for (const Span& s : ApplyBehavior(spans, step.behavior)) {
    if (s.end > s.begin) out->push_back(piece.substr(s.begin, s.end - s.begin));
  }
}

std::vector<std::string> PreTokenizer::Run(std::string_view text) const {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    next.reserve(pieces.size());
    for (std::string& piece : pieces) {
      if (!step.pattern.has_value()) {
        if (piece.front() != ' ') piece.insert(piece.begin(), ' ');
        next.push_back(std::move(piece));
      } else {
        ApplySplit(step, piece, &next);
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace strata
