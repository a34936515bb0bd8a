// Reading the small JSON files of a Hugging Face model directory without exceptions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "src/core/status.h"

namespace strata {

// Parses the JSON file at `path`. NotFound for a missing file; Corrupt, naming the file, when it
// is not valid JSON. Never throws.
Result<nlohmann::json> ReadJsonFile(const std::string& path);

// Typed lookups that never throw: nullopt when `key` is absent, null, or of another type.
std::optional<int64_t> JsonInt(const nlohmann::json& obj, const char* key);
std::optional<double> JsonNumber(const nlohmann::json& obj, const char* key);
std::optional<bool> JsonBool(const nlohmann::json& obj, const char* key);
std::optional<std::string> JsonString(const nlohmann::json& obj, const char* key);

}  // namespace strata
