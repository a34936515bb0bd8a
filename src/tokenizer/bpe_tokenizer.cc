#include "src/tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "src/tokenizer/byte_level.h"

namespace strata {

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::Create(BpeTokenizerSpec spec) {
  int32_t max_id = -1;
  for (const auto& [spelling, id] : spec.vocab) {
    if (id < 0) return Status::InvalidArgument("token '" + spelling + "' has a negative id");
    max_id = std::max(max_id, id);
  }
  for (const AddedToken& token : spec.added_tokens) {
    if (token.id < 0) {
      return Status::InvalidArgument("added token '" + token.content + "' has a negative id");
    }
    max_id = std::max(max_id, token.id);
  }
  for (const auto& [name, id] : {std::pair{"BOS", spec.bos_id}, std::pair{"EOS", spec.eos_id}}) {
    if (id < -1 || id > max_id) {
      return Status::InvalidArgument(std::string(name) + " token id " + std::to_string(id) +
                                     " is outside the vocabulary of " + std::to_string(max_id + 1) +
                                     " tokens");
    }
  }
  STRATA_ASSIGN_OR_RETURN(BpeModel model,
                          BpeModel::Create(spec.vocab, spec.merges, spec.model_options));
  std::vector<AddedToken> matched;
  for (const AddedToken& token : spec.added_tokens) {
    if (!token.content.empty()) matched.push_back(token);
  }
  STRATA_ASSIGN_OR_RETURN(AddedTokenMatcher matcher, AddedTokenMatcher::Create(matched));

  std::unique_ptr<BpeTokenizer> tokenizer(
      new BpeTokenizer(std::move(model), std::move(matcher), std::move(spec.pre_tokenizer)));
  TokenTable& table = tokenizer->table_;
  table.Resize(static_cast<size_t>(max_id) + 1);
  for (const auto& [spelling, id] : spec.vocab) {
    // tokenizers' ByteLevel decoder keeps a token it cannot map as its literal text.
    table.Set(id, ByteLevelDecode(spelling).value_or(spelling), false);
  }
  for (const AddedToken& token : spec.added_tokens) {
    table.Set(token.id, token.content, token.special);
    table.AddName(token.content, token.id);
  }
  tokenizer->SetSpecialIds(spec.bos_id, spec.eos_id, spec.add_bos);
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids = StartIds(add_bos);
  ids.reserve(text.size() / 3 + 2);
  for (const TextPiece& piece : matcher_.Split(text)) {
    if (piece.token_id >= 0) {
      ids.push_back(piece.token_id);
      continue;
    }
    for (const std::string& word : pre_tokenizer_.Run(piece.text)) model_.Encode(word, &ids);
  }
  return ids;
}

}  // namespace strata
