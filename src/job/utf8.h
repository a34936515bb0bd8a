// UTF-8 validation with the same rules as RFC 3629 (and nlohmann::json's lexer): no overlong
// forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

// Returns the byte offset of the first byte that does not start a valid UTF-8 sequence, or
// nullopt when `s` is valid UTF-8.
std::optional<size_t> FindInvalidUtf8(std::string_view s);

// Returns `s` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string ReplaceInvalidUtf8(std::string_view s);

}  // namespace strata
