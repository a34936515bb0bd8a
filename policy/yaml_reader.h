// Internal to policy/: typed reading of one YAML map with messages that name the key and the file,
// and the only place in policy/ where yaml-cpp is called. yaml-cpp throws; every exception is
// caught here and becomes a Status, so none crosses into the runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/core/status.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace strata::policy_internal {

// Reads the named fields of one YAML map. Each getter records the first error (missing key, wrong
// type, value out of range) and leaves *out unchanged; Finish() returns that error, or an error
// for a key the caller never asked about (a typo must not be silently ignored).
// Not thread-safe; one reader per document.
class YamlMapReader {
 public:
  // Parses `text`; `origin` (a file path or "<string>") prefixes every message.
  YamlMapReader(const std::string& text, std::string origin);
  ~YamlMapReader();
  YamlMapReader(const YamlMapReader&) = delete;
  YamlMapReader& operator=(const YamlMapReader&) = delete;

  // Required keys. Integers must be whole numbers; `min` is the smallest accepted value.
  void Int(const char* key, int* out, int64_t min);
  void Int64(const char* key, int64_t* out, int64_t min);
  // A rate or size given as a plain number; REQUIRES > 0 when positive is true, else >= 0.
  void Double(const char* key, double* out, bool positive);
  void Bool(const char* key, bool* out);
  void String(const char* key, std::string* out);
  // Optional keys keep *out when absent.
  void OptionalBool(const char* key, bool* out);
  void OptionalString(const char* key, std::string* out);
  void OptionalInt(const char* key, int* out, int64_t min);
  void OptionalInt64(const char* key, int64_t* out, int64_t min);
  void OptionalDouble(const char* key, double* out, bool positive);
  // An optional map from whole numbers (>= 1) to positive numbers, e.g. {1: 0.9, 16: 14.2}, in
  // the order written (an empty map gives no entries); a whole number given twice is an error.
  void OptionalWholeToPositiveMap(const char* key, std::vector<std::pair<int64_t, double>>* out);

  Status Finish();

 private:
  // True when `key` holds a value; records the key as known.
  bool Present(const char* key);
  void Fail(const std::string& message);

  std::string origin_;
  std::unique_ptr<YAML::Node> root_;  // a pointer so that yaml-cpp stays out of this header
  std::set<std::string> asked_;
  Status status_;
};

// Reads a whole file; NotFound/IoError name the path.
Result<std::string> ReadTextFile(const std::string& path);

// Formats a double with the fewest digits that read back to the same value.
std::string FormatDouble(double value);

}  // namespace strata::policy_internal
