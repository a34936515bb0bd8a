// Typed reads of nlohmann::json values for the tokenizer.json readers, without exceptions: every
// wrong type or missing field comes back as Corrupt naming the field's path ("model.vocab").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "src/core/status.h"

namespace strata {

// The member `key` of `object`, or nullptr when absent or when `object` is not an object.
const nlohmann::json* JsonMember(const nlohmann::json& object, const char* key);

// The member `key` as a type; `fallback` when absent or null. `where` names `object` in errors.
Result<bool> JsonBool(const nlohmann::json& object, const char* key, bool fallback,
                      const std::string& where);
Result<std::string> JsonString(const nlohmann::json& object, const char* key,
                               const std::string& fallback, const std::string& where);
// A required non-negative integer that fits an int32_t.
Result<int32_t> JsonId(const nlohmann::json& object, const char* key, const std::string& where);

// Corrupt: "<where>: <what>".
Status JsonError(const std::string& where, const std::string& what);

}  // namespace strata
