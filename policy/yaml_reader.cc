#include "policy/yaml_reader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

namespace strata::policy_internal {
namespace {

const char* TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "undefined";
  }
}

}  // namespace

YamlMapReader::YamlMapReader(const std::string& text, std::string origin)
    : origin_(std::move(origin)), root_(std::make_unique<YAML::Node>()) {
  try {
    *root_ = YAML::Load(text);
    if (!root_->IsMap()) {
      Fail(std::string("the document must be a map of key: value lines, but it is ") +
           TypeName(*root_));
    }
  } catch (const YAML::Exception& e) {
    Fail("not valid YAML: " + std::string(e.what()));
  }
}

YamlMapReader::~YamlMapReader() = default;

void YamlMapReader::Fail(const std::string& message) {
  if (status_.ok()) status_ = Status::InvalidArgument(origin_ + ": " + message);
}

namespace {

// The scalar under `key`, or nullopt (after `fail`) when it is missing or not a scalar.
template <typename FailFn>
std::optional<YAML::Node> Lookup(const YAML::Node& root, const char* key, bool required,
                                 FailFn fail) {
  if (!root.IsMap()) return std::nullopt;
  YAML::Node node = root[key];
  if (!node.IsDefined() || node.IsNull()) {
    if (required) fail(std::string("missing key '") + key + "'");
    return std::nullopt;
  }
  if (!node.IsScalar()) {
    fail(std::string("key '") + key + "' must be a single value, but it is " + TypeName(node));
    return std::nullopt;
  }
  return node;
}

// Whole numbers, including the 1.5e12 style YAML writers produce for large sizes.
bool ParseWholeNumber(const std::string& text, int64_t* out) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size()) {
    *out = value;
    return true;
  }
  std::istringstream in(text);
  double as_double = 0;
  if (!(in >> as_double) || !in.eof() || as_double != std::floor(as_double) ||
      std::fabs(as_double) > 9.0e18) {
    return false;
  }
  *out = static_cast<int64_t>(as_double);
  return true;
}

// Finite numbers, surrounding blanks allowed.
bool ParseNumber(const std::string& text, double* out) {
  std::istringstream in(text);
  double value = 0;
  if (!(in >> value) || !(in >> std::ws).eof() || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

}  // namespace

void YamlMapReader::Int64(const char* key, int64_t* out, int64_t min) {
  asked_.insert(key);
  if (!status_.ok()) return;
  auto fail = [&](const std::string& m) { Fail(m); };
  std::optional<YAML::Node> node = Lookup(*root_, key, true, fail);
  if (!node) return;
  const std::string text = node->Scalar();
  int64_t value = 0;
  if (!ParseWholeNumber(text, &value)) {
    Fail(std::string("key '") + key + "' must be a whole number, got '" + text + "'");
    return;
  }
  if (value < min) {
    Fail(std::string("key '") + key + "' must be at least " + std::to_string(min) + ", got " +
         std::to_string(value));
    return;
  }
  *out = value;
}

void YamlMapReader::Int(const char* key, int* out, int64_t min) {
  int64_t value = *out;
  Int64(key, &value, min);
  if (status_.ok() && value > INT32_MAX) {
    Fail(std::string("key '") + key + "' is too large: " + std::to_string(value));
    return;
  }
  if (status_.ok()) *out = static_cast<int>(value);
}

bool YamlMapReader::Present(const char* key) {
  asked_.insert(key);
  if (!status_.ok() || !root_->IsMap()) return false;
  const YAML::Node& root = *root_;  // const: operator[] must not insert the key
  YAML::Node node = root[key];
  return node.IsDefined() && !node.IsNull();
}

void YamlMapReader::OptionalInt(const char* key, int* out, int64_t min) {
  if (Present(key)) Int(key, out, min);
}

void YamlMapReader::OptionalInt64(const char* key, int64_t* out, int64_t min) {
  if (Present(key)) Int64(key, out, min);
}

void YamlMapReader::OptionalDouble(const char* key, double* out, bool positive) {
  if (Present(key)) Double(key, out, positive);
}

void YamlMapReader::Double(const char* key, double* out, bool positive) {
  asked_.insert(key);
  if (!status_.ok()) return;
  auto fail = [&](const std::string& m) { Fail(m); };
  std::optional<YAML::Node> node = Lookup(*root_, key, true, fail);
  if (!node) return;
  const std::string text = node->Scalar();
  double value = 0;
  if (!ParseNumber(text, &value)) {
    Fail(std::string("key '") + key + "' must be a number, got '" + text + "'");
    return;
  }
  if (positive ? value <= 0 : value < 0) {
    Fail(std::string("key '") + key + "' must be " + (positive ? "positive" : "non-negative") +
         ", got " + text);
    return;
  }
  *out = value;
}

void YamlMapReader::OptionalWholeToPositiveMap(const char* key,
                                               std::vector<std::pair<int64_t, double>>* out) {
  if (!Present(key)) return;
  const YAML::Node& root = *root_;
  const YAML::Node node = root[key];
  const std::string name = std::string("key '") + key + "'";
  if (!node.IsMap()) {
    Fail(name + " must be a map of whole numbers to positive numbers, e.g. {1: 0.9, 16: 14.2}, " +
         "but it is " + TypeName(node));
    return;
  }
  std::vector<std::pair<int64_t, double>> entries;
  for (const auto& entry : node) {
    const std::string from = entry.first.IsScalar() ? entry.first.Scalar() : "";
    int64_t whole = 0;
    if (!entry.first.IsScalar() || !ParseWholeNumber(from, &whole) || whole < 1) {
      Fail(name + " must map whole numbers of at least 1, got '" + from + "'");
      return;
    }
    const std::string to = entry.second.IsScalar() ? entry.second.Scalar() : "";
    double value = 0;
    if (!entry.second.IsScalar() || !ParseNumber(to, &value) || value <= 0) {
      Fail(name + " must map " + from + " to a positive number, got '" + to + "'");
      return;
    }
    if (std::any_of(entries.begin(), entries.end(),
                    [&](const auto& seen) { return seen.first == whole; })) {
      Fail(name + " maps " + std::to_string(whole) + " twice");
      return;
    }
    entries.emplace_back(whole, value);
  }
  *out = std::move(entries);
}

void YamlMapReader::Bool(const char* key, bool* out) {
  asked_.insert(key);
  if (!status_.ok()) return;
  auto fail = [&](const std::string& m) { Fail(m); };
  std::optional<YAML::Node> node = Lookup(*root_, key, true, fail);
  if (!node) return;
  try {
    *out = node->as<bool>();
  } catch (const YAML::Exception&) {
    Fail(std::string("key '") + key + "' must be true or false, got '" + node->Scalar() + "'");
  }
}

void YamlMapReader::OptionalBool(const char* key, bool* out) {
  if (Present(key)) Bool(key, out);
}

void YamlMapReader::String(const char* key, std::string* out) {
  asked_.insert(key);
  if (!status_.ok()) return;
  auto fail = [&](const std::string& m) { Fail(m); };
  std::optional<YAML::Node> node = Lookup(*root_, key, true, fail);
  if (node) *out = node->Scalar();
}

void YamlMapReader::OptionalString(const char* key, std::string* out) {
  if (Present(key)) String(key, out);
}

Status YamlMapReader::Finish() {
  if (!status_.ok()) return status_;
  try {
    const YAML::Node& root = *root_;
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (asked_.count(key) == 0) {
        std::string known;
        for (const std::string& k : asked_) known += (known.empty() ? "" : ", ") + k;
        return Status::InvalidArgument(origin_ + ": unknown key '" + key +
                                       "' (known keys: " + known + ")");
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(origin_ + ": " + e.what());
  }
  return Status::Ok();
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IoError("cannot read '" + path + "'");
  return text.str();
}

std::string FormatDouble(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

}  // namespace strata::policy_internal
