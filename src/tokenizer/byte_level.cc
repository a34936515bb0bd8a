#include "src/tokenizer/byte_level.h"

#include <array>

#include "src/tokenizer/utf8.h"

namespace strata {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes take the code points 256,
// 257, ... in byte order. The largest code point used is 323, so the inverse is a small array.
constexpr uint32_t kAlphabetLimit = 324;

struct ByteLevelTables {
  std::array<uint32_t, 256> byte_to_codepoint;
  std::array<int16_t, kAlphabetLimit> codepoint_to_byte;

  ByteLevelTables() {
    codepoint_to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_codepoint[b] = printable ? b : next_extra++;
      codepoint_to_byte[byte_to_codepoint[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelTables& Tables() {
  static const ByteLevelTables tables;
  return tables;
}

}  // namespace

std::string ByteLevelEncode(std::string_view bytes) {
  const ByteLevelTables& tables = Tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(tables.byte_to_codepoint[static_cast<uint8_t>(c)], &out);
  return out;
}

std::optional<std::string> ByteLevelDecode(std::string_view text) {
  const ByteLevelTables& tables = Tables();
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = NextUtf8Char(text, pos);
    if (c.kind != Utf8Kind::kValid || c.codepoint >= kAlphabetLimit ||
        tables.codepoint_to_byte[c.codepoint] < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(tables.codepoint_to_byte[c.codepoint]));
    pos += c.length;
  }
  return out;
}

}  // namespace strata
