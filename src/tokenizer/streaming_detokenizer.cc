#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/utf8.h"

namespace strata {

std::string StreamingDetokenizer::Push(int32_t id) {
  if (id < 0 || id >= tokenizer_.vocab_size() || (skip_special_ && tokenizer_.IsSpecial(id))) {
    return "";
  }
  pending_ += tokenizer_.TokenBytes(id);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Char c = NextUtf8Char(pending_, pos);
    if (c.kind == Utf8Kind::kTruncated) break;  // held until more bytes arrive
    if (c.kind == Utf8Kind::kValid) {
      out.append(pending_, pos, c.length);
    } else {
      out.append(kReplacementCharacter);
    }
    pos += c.length;
  }
  pending_.erase(0, pos);
  return out;
}

void StreamingDetokenizer::Finish() { pending_.clear(); }

}  // namespace strata
