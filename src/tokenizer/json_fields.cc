#include "src/tokenizer/json_fields.h"

#include <limits>

namespace strata {

using nlohmann::json;

const json* JsonMember(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Status JsonError(const std::string& where, const std::string& what) {
  return Status::Corrupt(where + ": " + what);
}

Result<bool> JsonBool(const json& object, const char* key, bool fallback,
                      const std::string& where) {
  const json* value = JsonMember(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) return JsonError(where + "." + key, "expected true or false");
  return value->get<bool>();
}

Result<std::string> JsonString(const json& object, const char* key, const std::string& fallback,
                               const std::string& where) {
  const json* value = JsonMember(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_string()) return JsonError(where + "." + key, "expected a string");
  return value->get<std::string>();
}

Result<int32_t> JsonId(const json& object, const char* key, const std::string& where) {
  const json* value = JsonMember(object, key);
  if (value == nullptr) return JsonError(where, std::string("missing \"") + key + "\"");
  if (!value->is_number_unsigned() ||
      value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return JsonError(where + "." + key, "expected a non-negative 32-bit integer");
  }
  return static_cast<int32_t>(value->get<uint64_t>());
}

}  // namespace strata
