#include "src/tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <vector>

#include "src/tokenizer/added_tokens.h"
#include "src/tokenizer/token_table.h"

namespace strata {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's space

// What a piece decodes to: a byte piece "<0xXX>" its byte, a control piece its text, any other
// its text with "▁" as spaces.
std::string Spelling(const sentencepiece::SentencePieceProcessor& sp, int id) {
  const std::string& piece = sp.IdToPiece(id);
  if (sp.IsByte(id) && piece.size() == 6) {
    return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
  }
  if (sp.IsControl(id)) return piece;
  std::string out;
  for (size_t at = 0;;) {
    const size_t next = piece.find(kSpace, at);
    out.append(piece, at, next == std::string::npos ? std::string::npos : next - at);
    if (next == std::string::npos) return out;
    out += ' ';
    at = next + kSpace.size();
  }
}

class SentencePieceModelTokenizer final : public TableTokenizer {
 public:
  SentencePieceModelTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp,
                              AddedTokenMatcher matcher, bool add_bos)
      : sp_(std::move(sp)), matcher_(std::move(matcher)) {
    SetSpecialIds(sp_->bos_id(), sp_->eos_id(), add_bos);
    table_.Resize(static_cast<size_t>(sp_->GetPieceSize()));
    for (int id = 0; id < sp_->GetPieceSize(); ++id) {
      table_.Set(id, Spelling(*sp_, id), sp_->IsControl(id));  // control pieces are special
      if (sp_->IsControl(id)) table_.AddName(sp_->IdToPiece(id), id);
    }
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids = StartIds(add_bos);
    for (const TextPiece& piece : matcher_.Split(text)) {
      if (piece.token_id >= 0) {
        ids.push_back(piece.token_id);
        continue;
      }
      std::vector<int> run;
      if (sp_->Encode(piece.text, &run).ok()) ids.insert(ids.end(), run.begin(), run.end());
    }
    return ids;
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  AddedTokenMatcher matcher_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadSentencePieceModel(const std::string& path, bool add_bos) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound(path + ": no such SentencePiece model");
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const sentencepiece::util::Status s = sp->Load(path); !s.ok()) {
    return Status::Corrupt(path + ": sentencepiece cannot load it: " + s.ToString());
  }
  std::vector<AddedToken> controls;
  for (int id = 0; id < sp->GetPieceSize(); ++id) {
    if (!sp->IsControl(id) || sp->IdToPiece(id).empty()) continue;
    AddedToken token;
    token.id = id;
    token.content = sp->IdToPiece(id);
    token.special = true;
    controls.push_back(std::move(token));
  }
  STRATA_ASSIGN_OR_RETURN(AddedTokenMatcher matcher, AddedTokenMatcher::Create(controls));
  return std::unique_ptr<Tokenizer>(
      new SentencePieceModelTokenizer(std::move(sp), std::move(matcher), add_bos));
}

}  // namespace strata
