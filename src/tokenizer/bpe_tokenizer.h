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

class BpeTokenizer final : public Tokenizer {
 public:
  // Errors: InvalidArgument for a negative id or a bos/eos id outside the vocabulary, Corrupt for
  // a merge that names a missing token.
  static Result<std::unique_ptr<Tokenizer>> Create(BpeTokenizerSpec spec);

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override;
  std::string TokenBytes(int32_t id) const override { return table_.Bytes(id); }
  // Ids outside [0, vocab_size()) contribute nothing.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    return table_.Decode(ids, skip_special);
  }
  int vocab_size() const override { return table_.size(); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }
  bool add_bos_by_default() const override { return add_bos_; }
  bool IsSpecial(int32_t id) const override { return table_.IsSpecial(id); }
  // Any added token counts, special or not ("<think>" in a GGUF user-defined token).
  int32_t SpecialTokenId(std::string_view text) const override { return table_.Named(text); }

 private:
  BpeTokenizer(BpeModel model, AddedTokenMatcher matcher, PreTokenizer pre_tokenizer)
      : model_(std::move(model)),
        matcher_(std::move(matcher)),
        pre_tokenizer_(std::move(pre_tokenizer)) {}

  BpeModel model_;
  AddedTokenMatcher matcher_;
  PreTokenizer pre_tokenizer_;
  TokenTable table_;  // bytes of ids nothing names are empty
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
};

}  // namespace strata
