// BpeTokenizer: the byte-level BPE Tokenizer. Encoding runs, as Hugging Face tokenizers does:
// added tokens are cut out of the text first; every other run goes through the pre-tokenizer and
// each piece through the BPE model; BOS is prepended on request. There is no normalizer (the
// readers refuse tokenizers that need one). Thread-safe (const after construction).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/status.h"
#include "src/tokenizer/added_tokens.h"
#include "src/tokenizer/bpe_model.h"
#include "src/tokenizer/pretokenizer.h"
#include "src/tokenizer/token_table.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

// Everything a BpeTokenizer is built from, as the tokenizer.json and GGUF readers fill it in.
struct BpeTokenizerSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // byte-level spellings and their ids
  std::vector<std::pair<std::string, std::string>> merges;  // highest priority first
  BpeModel::Options model_options;
  std::vector<AddedToken> added_tokens;  // ids may or may not also appear in `vocab`
  PreTokenizer pre_tokenizer;
  int32_t bos_id = -1;   // -1 when none
  int32_t eos_id = -1;   // -1 when none
  bool add_bos = false;  // whether BOS is prepended by default; REQUIRES: bos_id >= 0 when set
};

class BpeTokenizer final : public TableTokenizer {
 public:
  // Errors: InvalidArgument for a negative id or a bos/eos id outside the vocabulary, Corrupt for
  // a merge that names a missing token.
  static Result<std::unique_ptr<Tokenizer>> Create(BpeTokenizerSpec spec);

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override;

 private:
  BpeTokenizer(BpeModel model, AddedTokenMatcher matcher, PreTokenizer pre_tokenizer)
      : model_(std::move(model)),
        matcher_(std::move(matcher)),
        pre_tokenizer_(std::move(pre_tokenizer)) {}

  BpeModel model_;
  AddedTokenMatcher matcher_;
  PreTokenizer pre_tokenizer_;
};

}  // namespace strata
