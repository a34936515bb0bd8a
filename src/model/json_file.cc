#include "src/model/json_file.h"

#include "src/io/mapped_file.h"

namespace strata {
namespace {

// The value under `key` when `obj` is an object holding it and it is not null, else nullptr.
const nlohmann::json* Member(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  const char* begin = reinterpret_cast<const char*>(file->data());
  nlohmann::json j = nlohmann::json::parse(begin, begin + file->size(), nullptr, false);
  if (j.is_discarded()) return Status::Corrupt(path + ": not valid JSON");
  return j;
}

std::optional<int64_t> JsonInt(const nlohmann::json& obj, const char* key) {
  const nlohmann::json* v = Member(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  return std::nullopt;
}

std::optional<double> JsonNumber(const nlohmann::json& obj, const char* key) {
  const nlohmann::json* v = Member(obj, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<bool> JsonBool(const nlohmann::json& obj, const char* key) {
  const nlohmann::json* v = Member(obj, key);
  if (v == nullptr || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

std::optional<std::string> JsonString(const nlohmann::json& obj, const char* key) {
  const nlohmann::json* v = Member(obj, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

}  // namespace strata
