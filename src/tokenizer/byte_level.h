// GPT-2's byte-level alphabet (bytes_to_unicode): a reversible map of the 256 byte values to
// printable Unicode characters, so that a byte-level BPE vocabulary is spelled in text ("Ġhello"
// stands for the bytes " hello"). Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

// The byte-level spelling of raw `bytes` (each byte becomes one character of the alphabet).
std::string ByteLevelEncode(std::string_view bytes);

// The raw bytes a byte-level spelling stands for; nullopt when `text` is not valid UTF-8 or holds
// a character outside the 256-character alphabet (e.g. a literal space).
std::optional<std::string> ByteLevelDecode(std::string_view text);

}  // namespace strata
