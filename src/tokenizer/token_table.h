// TokenTable: what a tokenizer's ids stand for, shared by its implementations: the bytes each id
// decodes to, which ids are special (left out by Decode(skip_special)), and the ids of added tokens
// by their text. TableTokenizer: a Tokenizer that answers everything but Encode from one, with
// its BOS/EOS ids. Thread-safe after they are filled (const methods only).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/core/check.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {

class TokenTable {
 public:
  // Ids [0, n), each empty and not special.
  void Resize(size_t n) {
    bytes_.assign(n, "");
    special_.assign(n, false);
  }
  // REQUIRES: 0 <= id < size().
  void Set(int32_t id, std::string bytes, bool special) {
    bytes_[static_cast<size_t>(id)] = std::move(bytes);
    special_[static_cast<size_t>(id)] = special;
  }
  // Makes `text` name `id` for Named() (an added token; the first one given for a text wins).
  void AddName(const std::string& text, int32_t id) { named_.emplace(text, id); }

  int size() const { return static_cast<int>(bytes_.size()); }
  // REQUIRES: 0 <= id < size().
  const std::string& Bytes(int32_t id) const {
    STRATA_CHECK(id >= 0 && id < size());
    return bytes_[static_cast<size_t>(id)];
  }
  bool IsSpecial(int32_t id) const { return id >= 0 && id < size() && special_[id]; }
  // Concatenated bytes of `ids`; ids outside [0, size()) and, when `skip_special`, special ones
  // add nothing.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const {
    std::string out;
    for (const int32_t id : ids) {
      if (id < 0 || id >= size() || (skip_special && special_[id])) continue;
      out += bytes_[id];
    }
    return out;
  }
  // The id an added token's text names, or -1.
  int32_t Named(std::string_view text) const {
    const auto it = named_.find(std::string(text));
    return it == named_.end() ? -1 : it->second;
  }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::unordered_map<std::string, int32_t> named_;
};

class TableTokenizer : public Tokenizer {
 public:
  std::string TokenBytes(int32_t id) const final { return table_.Bytes(id); }
  // Ids outside [0, vocab_size()) contribute nothing.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const final {
    return table_.Decode(ids, skip_special);
  }
  int vocab_size() const final { return table_.size(); }
  int bos_id() const final { return bos_id_; }
  int eos_id() const final { return eos_id_; }
  bool add_bos_by_default() const final { return add_bos_; }
  bool IsSpecial(int32_t id) const final { return table_.IsSpecial(id); }
  // Any added token counts, special or not ("<think>" in a GGUF user-defined token).
  int32_t SpecialTokenId(std::string_view text) const final { return table_.Named(text); }

 protected:
  // BOS is prepended by default only when `add_bos` and the tokenizer has one.
  void SetSpecialIds(int32_t bos_id, int32_t eos_id, bool add_bos) {
    bos_id_ = bos_id;
    eos_id_ = eos_id;
    add_bos_ = add_bos && bos_id >= 0;
  }
  // What Encode's ids start with: BOS when `add_bos` and the tokenizer has one.
  std::vector<int32_t> StartIds(bool add_bos) const {
    return add_bos && bos_id_ >= 0 ? std::vector<int32_t>{bos_id_} : std::vector<int32_t>{};
  }

  TokenTable table_;

 private:
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
};

}  // namespace strata
