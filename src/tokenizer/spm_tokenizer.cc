#include "src/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <queue>

namespace strata {
namespace {

constexpr int32_t kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's space

// The byte a piece "<0xXX>" stands for, or -1.
int BytePieceValue(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// `s` with every "▁" written as a space.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t next = s.find(kSpace, at);
    out.append(s.substr(at, next - at));
    if (next == std::string_view::npos) return out;
    out += ' ';
    at = next + kSpace.size();
  }
}

// The length of the UTF-8 character whose first byte is `lead`, as llama.cpp counts it (by the
// lead byte alone; a stray continuation byte is a character of one byte).
size_t CharLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> SpmTokenizer::Create(SpmTokenizerSpec spec) {
  const size_t n = spec.pieces.size();
  if (spec.scores.size() != n || spec.token_types.size() != n) {
    return Status::Corrupt("SentencePiece vocabulary: " + std::to_string(n) + " pieces but " +
                           std::to_string(spec.scores.size()) + " scores and " +
                           std::to_string(spec.token_types.size()) + " token types");
  }
  for (const int32_t id : {spec.bos_id, spec.eos_id}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return Status::Corrupt("SentencePiece vocabulary: bos/eos id " + std::to_string(id) +
                             " outside its " + std::to_string(n) + " pieces");
    }
  }
  std::vector<AddedToken> added;
  for (size_t id = 0; id < n; ++id) {
    const int32_t type = spec.token_types[id];
    if ((type == kControl || type == kUserDefined) && !spec.pieces[id].empty()) {
      AddedToken token;
      token.id = static_cast<int32_t>(id);
      token.content = spec.pieces[id];
      token.special = type == kControl;
      added.push_back(std::move(token));
    }
  }
  STRATA_ASSIGN_OR_RETURN(AddedTokenMatcher matcher, AddedTokenMatcher::Create(added));
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer(std::move(matcher)));
  t->byte_ids_.fill(-1);
  t->table_.Resize(n);
  int32_t unknown = -1;
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = spec.pieces[id];
    const int32_t type = spec.token_types[id];
    t->ids_.insert_or_assign(piece, static_cast<int32_t>(id));  // as llama.cpp: the last one wins
    const int byte = type == kByte ? BytePieceValue(piece) : -1;
    if (byte >= 0) t->byte_ids_[static_cast<size_t>(byte)] = static_cast<int32_t>(id);
    t->table_.Set(static_cast<int32_t>(id),
                  byte >= 0          ? std::string(1, static_cast<char>(byte))
                  : type == kControl ? piece
                                     : Unescape(piece),
                  type == kControl);
    if (type == kControl || type == kUserDefined) {
      t->table_.AddName(piece, static_cast<int32_t>(id));
    }
    if (type == kUnknown && unknown < 0) unknown = static_cast<int32_t>(id);
  }
  for (int32_t& id : t->byte_ids_) {
    if (id < 0) id = unknown;
  }
  t->scores_ = std::move(spec.scores);
  t->SetSpecialIds(spec.bos_id, spec.eos_id, spec.add_bos);
  t->add_space_prefix_ = spec.add_space_prefix;
  return std::unique_ptr<Tokenizer>(std::move(t));
}

int32_t SpmTokenizer::PieceId(std::string_view piece) const {
  const auto it = ids_.find(std::string(piece));
  return it == ids_.end() ? -1 : it->second;
}

void SpmTokenizer::EncodeRun(std::string_view text, std::vector<int32_t>* out) const {
  // Symbols: spans of `text`, linked as a list; a merged-away symbol has length 0.
  struct Symbol {
    size_t begin, length;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < text.size();) {
    const size_t length =
        std::min(CharLength(static_cast<unsigned char>(text[at])), text.size() - at);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({at, length, index - 1, index + 1});
    at += length;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Bigram {
    float score;
    int left, right;
    size_t length;
    // The highest score first; on a tie, the leftmost.
    bool operator<(const Bigram& o) const {
      return score < o.score || (score == o.score && left > o.left);
    }
  };
  std::priority_queue<Bigram> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = PieceId(text.substr(symbols[left].begin, length));
    if (id >= 0) queue.push({scores_[static_cast<size_t>(id)], left, right, length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol &left = symbols[b.left], &right = symbols[b.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != b.length) {
      continue;  // one side was merged into another pair since this one was queued
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].length);
    if (const int32_t id = PieceId(piece); id >= 0) {
      out->push_back(id);
      continue;
    }
    for (const char c : piece) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id >= 0) out->push_back(id);
    }
  }
}

std::vector<int32_t> SpmTokenizer::Encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids = StartIds(add_bos);
  bool after_token = true;  // the text starts as if after a token: it gets the space prefix
  for (const TextPiece& piece : matcher_.Split(text)) {
    if (piece.token_id >= 0) {
      ids.push_back(piece.token_id);
      after_token = true;
      continue;
    }
    std::string run;
    for (const char c : (add_space_prefix_ && after_token ? " " : "") + std::string(piece.text)) {
      if (c == ' ') {
        run += kSpace;
      } else {
        run += c;
      }
    }
    EncodeRun(run, &ids);
    after_token = false;
  }
  return ids;
}

}  // namespace strata
