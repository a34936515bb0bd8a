// PreTokenizer: cuts text into the pieces BPE runs on, as Hugging Face tokenizers' pre-tokenizers
// do. It is an ordered list of steps; each step applies to every piece the previous one produced
// (a pre_tokenizers.Sequence). Thread-safe after construction.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"
#include "src/tokenizer/regex.h"

namespace strata {

// The split ByteLevel(use_regex=true) applies (GPT-2's pattern).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// The split of Llama 3's tokenizer.json (and llama.cpp's "llama-bpe" pre-tokenizer).
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
// The split of Mistral's Tekken tokenizer.json (Mistral Nemo, Mistral Small 3; llama.cpp's
// "tekken", which rewrites it for its own regex engine): words split at lower-to-upper case
// changes, single digits, and "/" kept with the punctuation run before it.
inline constexpr std::string_view kTekkenSplitPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// The split of Qwen2's tokenizer.json (and llama.cpp's "qwen2"): Llama 3's with single digits.
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What a Split step does with the matches of its pattern (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,             // matches are dropped
  kIsolated,            // matches become pieces of their own
  kMergedWithPrevious,  // a match joins the piece before it
  kMergedWithNext,      // a match joins the piece after it
  kContiguous,          // runs of adjacent matches become one piece
};

class PreTokenizer {
 public:
  // Split: cuts every piece around the matches of `pattern` (or, with `invert`, around the text
  // between matches). The behaviour applies to what counts as a match after inversion.
  void AddSplit(Regex pattern, SplitBehavior behavior, bool invert);

  // ByteLevel: with `add_prefix_space` prepends " " to every piece not starting with one; with
  // `use_regex` then splits with kGpt2SplitPattern (isolated). The byte-level character mapping
  // itself needs no step: the BPE model works on raw bytes.
  Status AddByteLevel(bool add_prefix_space, bool use_regex);

  // Digits: isolates every numeric character (\p{N}) when `individual_digits`, else every run.
  Status AddDigits(bool individual_digits);

  // The pieces of `text`, in order, none empty. Their concatenation is `text` except for
  // removed matches and prefix spaces.
  std::vector<std::string> Run(std::string_view text) const;

 private:
  struct Step {
    std::optional<Regex> pattern;  // absent: the prefix-space step
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  static void ApplySplit(const Step& step, const std::string& piece, std::vector<std::string>* out);

  std::vector<Step> steps_;
};

}  // namespace strata
