// SilentTokenizer: the tokenizer of a model with synthetic weights (`strata bench` presets), whose
// prompts are token ids made up for the run: it encodes nothing, every id decodes to nothing, and
// it has no special tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/tokenizer/tokenizer.h"

namespace strata {

class SilentTokenizer final : public Tokenizer {
 public:
  explicit SilentTokenizer(int vocab) : vocab_(vocab) {}
  std::vector<int32_t> Encode(std::string_view, bool) const override { return {}; }
  std::string TokenBytes(int32_t) const override { return ""; }
  std::string Decode(const std::vector<int32_t>&, bool) const override { return ""; }
  int vocab_size() const override { return vocab_; }
  int bos_id() const override { return -1; }
  int eos_id() const override { return -1; }
  bool add_bos_by_default() const override { return false; }
  bool IsSpecial(int32_t) const override { return false; }
  int32_t SpecialTokenId(std::string_view) const override { return -1; }

 private:
  int vocab_;
};

}  // namespace strata
