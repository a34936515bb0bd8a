// SpmTokenizer: the SentencePiece-style tokenizer of Llama 2, Mistral 7B, CodeLlama and Yi as
// llama.cpp reads it from a GGUF file (tokenizer.ggml.model = "llama": pieces with scores, no
// merges), encoding as llama.cpp's SPM tokenizer does, which reproduces sentencepiece:
//   - control and user-defined tokens written in the text are cut out first and encoded as
//     themselves; a space is put before the first run of text and before every run that follows
//     such a token (add_space_prefix), and every space becomes "▁" (U+2581);
//   - a run starts as its UTF-8 characters; repeatedly, of the adjacent pairs whose concatenation
//     is a piece, the one with the highest score (the leftmost on a tie) is merged;
//   - what is left is a piece, or else goes out byte by byte as the "<0xXX>" byte pieces (byte
//     fallback), or as the unknown piece for a byte that has none (dropped without either).
// TokenBytes spells "▁" as a space and a byte piece as its byte, so decoded text keeps the space
// put before the first word (as llama.cpp's pieces do; a completion starts with the space that
// separates it from its prompt). Thread-safe (const after construction).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/core/status.h"
#include "src/tokenizer/added_tokens.h"
#include "src/tokenizer/token_table.h"

namespace strata {

// Everything an SpmTokenizer is built from (a GGUF vocabulary of model "llama").
struct SpmTokenizerSpec {
  std::vector<std::string> pieces;   // by id, spaces as "▁", bytes as "<0xXX>"
  std::vector<float> scores;         // by id
  std::vector<int32_t> token_types;  // by id: 1 normal, 2 unknown, 3 control, 4 user-defined,
                                     // 5 unused, 6 byte
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = true;
  bool add_space_prefix = true;
};

class SpmTokenizer final : public TableTokenizer {
 public:
  // Errors: Corrupt when scores or types do not match the pieces in number, or bos/eos lie
  // outside the vocabulary.
  static Result<std::unique_ptr<Tokenizer>> Create(SpmTokenizerSpec spec);

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override;

 private:
  explicit SpmTokenizer(AddedTokenMatcher matcher) : matcher_(std::move(matcher)) {}

  // Appends the ids of one run of text, spaces already written as "▁".
  void EncodeRun(std::string_view text, std::vector<int32_t>* out) const;
  int32_t PieceId(std::string_view piece) const;  // -1 when none

  AddedTokenMatcher matcher_;
  std::unordered_map<std::string, int32_t> ids_;  // piece -> id
  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_{};  // -1 where the vocabulary has no byte piece
  bool add_space_prefix_ = true;
};

}  // namespace strata
