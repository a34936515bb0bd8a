// Tokenizer::FromGgufVocab: a byte-level BPE tokenizer from tokenizer.ggml.* metadata, with the
// pre-tokenizer llama.cpp (src/llama-vocab.cpp) picks for the file's `pre` name.
#include <algorithm>
#include <array>
#include <string_view>

#include "src/core/log.h"
#include "src/tokenizer/bpe_tokenizer.h"
#include "src/tokenizer/spm_tokenizer.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {
namespace {

constexpr int32_t kTokenTypeControl = 3;
constexpr int32_t kTokenTypeUserDefined = 4;

// llama.cpp's LLAMA_VOCAB_PRE_TYPE_LLAMA3 names (they also set ignore_merges).
constexpr std::array<std::string_view, 8> kLlama3Names = {
    "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"};
// llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2 names (merges are applied).
constexpr std::array<std::string_view, 3> kQwen2Names = {"qwen2", "deepseek-r1-qwen", "megrez"};
// Names llama.cpp splits with { "\p{N}", GPT-2's regex }.
constexpr std::array<std::string_view, 7> kDigitsThenGpt2Names = {
    "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"};

bool Contains(const auto& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Whether the vocabulary starts a text with BOS when the file does not say (llama.cpp's
// llama_vocab::load: SentencePiece vocabularies do, and so do the BPE ones of the LLAMA3 and
// tekken pre-tokenizers).
bool AddsBos(const GgufVocab& vocab) {
  if (vocab.add_bos) return *vocab.add_bos;
  return vocab.model == "llama" || Contains(kLlama3Names, vocab.pre) || vocab.pre == "tekken";
}

Status BuildPreTokenizer(const std::string& pre, BpeTokenizerSpec* spec) {
  if (Contains(kLlama3Names, pre) || pre == "tekken") {  // both ignore_merges in llama.cpp
    STRATA_ASSIGN_OR_RETURN(
        Regex split, Regex::Compile(pre == "tekken" ? kTekkenSplitPattern : kLlama3SplitPattern));
    spec->pre_tokenizer.AddSplit(std::move(split), SplitBehavior::kIsolated, /*invert=*/false);
    spec->model_options.ignore_merges = true;
    return Status::Ok();
  }
  if (Contains(kQwen2Names, pre)) {
    STRATA_ASSIGN_OR_RETURN(Regex split, Regex::Compile(kQwen2SplitPattern));
    spec->pre_tokenizer.AddSplit(std::move(split), SplitBehavior::kIsolated, /*invert=*/false);
    return Status::Ok();
  }
  if (Contains(kDigitsThenGpt2Names, pre)) {
    STRATA_RETURN_IF_ERROR(spec->pre_tokenizer.AddDigits(/*individual_digits=*/true));
  } else if (pre != "default" && pre != "gpt-2" && pre != "gpt2") {
    LogWarn("tokenizer: GGUF pre-tokenizer '" + pre +
            "' is not known to strata; splitting with GPT-2's regex, so token ids may differ "
            "from llama.cpp's");
  }
  return spec->pre_tokenizer.AddByteLevel(/*add_prefix_space=*/false, /*use_regex=*/true);
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGgufVocab(const GgufVocab& vocab) {
  if (vocab.model == "llama") {
    SpmTokenizerSpec spec;
    spec.pieces = vocab.tokens;
    spec.scores = vocab.scores;
    spec.token_types = vocab.token_types;
    spec.bos_id = vocab.bos_token_id;
    spec.eos_id = vocab.eos_token_id;
    spec.add_bos = AddsBos(vocab);
    spec.add_space_prefix = vocab.add_space_prefix;
    auto tokenizer = SpmTokenizer::Create(std::move(spec));
    if (!tokenizer.ok()) return tokenizer.status().WithContext("GGUF tokenizer");
    return tokenizer;
  }
  if (vocab.model != "gpt2") {
    return Status::Unsupported("GGUF tokenizer model '" + vocab.model +
                               "' is not supported; strata reads byte-level BPE (\"gpt2\") and "
                               "SentencePiece (\"llama\") vocabularies");
  }
  if (vocab.tokens.empty()) return Status::Corrupt("GGUF vocabulary has no tokens");
  if (!vocab.token_types.empty() && vocab.token_types.size() != vocab.tokens.size()) {
    return Status::Corrupt("GGUF vocabulary has " + std::to_string(vocab.tokens.size()) +
                           " tokens but " + std::to_string(vocab.token_types.size()) +
                           " token types");
  }
  BpeTokenizerSpec spec;
  spec.vocab.reserve(vocab.tokens.size());
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    spec.vocab.emplace_back(vocab.tokens[id], static_cast<int32_t>(id));
    const int32_t type = vocab.token_types.empty() ? 1 : vocab.token_types[id];
    if (type == kTokenTypeControl || type == kTokenTypeUserDefined) {
      AddedToken token;
      token.id = static_cast<int32_t>(id);
      token.content = vocab.tokens[id];
      token.special = type == kTokenTypeControl;
      spec.added_tokens.push_back(std::move(token));
    }
  }
  spec.merges.reserve(vocab.merges.size());
  for (const std::string& merge : vocab.merges) {
    // As llama.cpp: the first space after the first character separates the two parts.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      return Status::Corrupt("GGUF merge '" + merge + "' is not two tokens separated by a space");
    }
    spec.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  STRATA_RETURN_IF_ERROR(BuildPreTokenizer(vocab.pre, &spec));
  spec.bos_id = vocab.bos_token_id;
  spec.eos_id = vocab.eos_token_id;
  spec.add_bos = AddsBos(vocab);
  auto tokenizer = BpeTokenizer::Create(std::move(spec));
  if (!tokenizer.ok()) return tokenizer.status().WithContext("GGUF tokenizer");
  return tokenizer;
}

}  // namespace strata
