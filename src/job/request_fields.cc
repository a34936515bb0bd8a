#include "src/job/request_fields.h"

#include <cstdint>
#include <limits>

namespace strata::request_fields {
namespace {

// Stores `v` in *out when it is a JSON integer in [lo, hi].
bool GetInteger(const Json& v, int64_t lo, uint64_t hi, uint64_t* out_unsigned, int64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > hi || (lo > 0 && u < static_cast<uint64_t>(lo))) return false;
    if (out_unsigned != nullptr) *out_unsigned = u;
    if (out != nullptr) *out = static_cast<int64_t>(u);
    return true;
  }
  const int64_t s = v.get<int64_t>();
  if (s < lo || (s >= 0 && static_cast<uint64_t>(s) > hi)) return false;
  if (out_unsigned != nullptr) *out_unsigned = static_cast<uint64_t>(s);
  if (out != nullptr) *out = s;
  return true;
}

std::optional<Problem> CheckStop(const Json& v, std::vector<std::string>* stop) {
  const std::string rule = "\"stop\" must be a string or an array of at most " +
                           std::to_string(kMaxStopStrings) + " non-empty strings";
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > kMaxStopStrings) {
      return Problem{"invalid_field", rule + ", got " + std::to_string(v.size()) + " entries"};
    }
    for (const Json& e : v) {
      if (!e.is_string()) return Problem{"invalid_field", rule + ", got " + Describe(e) + " in it"};
      out.push_back(e.get<std::string>());
    }
  } else {
    return Problem{"invalid_field", rule + ", got " + Describe(v)};
  }
  for (const std::string& s : out) {
    if (s.empty()) return Problem{"invalid_field", rule + ", got an empty string"};
    if (s.find('\0') != std::string::npos) {
      return Problem{"invalid_field", "\"stop\" contains a NUL character (\\u0000); remove it"};
    }
  }
  *stop = std::move(out);
  return std::nullopt;
}

}  // namespace

std::string Quoted(std::string_view field) {
  std::string out = "\"";
  out.append(field);
  out += '"';
  return out;
}

std::string Describe(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::optional<Problem> CheckCustomId(const Json& obj, std::string* id) {
  const auto it = obj.find("custom_id");
  if (it == obj.end()) {
    return Problem{"invalid_custom_id",
                   "\"custom_id\" is missing; every line needs a unique non-empty string id"};
  }
  if (!it->is_string()) {
    return Problem{"invalid_custom_id",
                   "\"custom_id\" must be a string, got " + Describe(*it) + "; quote it"};
  }
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty()) {
    return Problem{"invalid_custom_id",
                   "\"custom_id\" is empty; every line needs a unique non-empty string id"};
  }
  if (s.size() > kMaxCustomIdBytes) {
    return Problem{"invalid_custom_id", "\"custom_id\" is " + std::to_string(s.size()) +
                                            " bytes; the limit is " +
                                            std::to_string(kMaxCustomIdBytes) + " bytes"};
  }
  if (s.find('\0') != std::string::npos) {
    return Problem{"invalid_custom_id", "\"custom_id\" contains a NUL character; remove it"};
  }
  *id = s;
  return std::nullopt;
}

std::optional<Problem> CheckPromptText(const Json& v, std::string_view name, std::string* prompt) {
  if (!v.is_string()) {
    return Problem{"invalid_field", Quoted(name) + " must be a string, got " + Describe(v) +
                                        "; write one line per prompt, as text"};
  }
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) return Problem{"empty_prompt", Quoted(name) + " is empty; give it text"};
  if (s.find('\0') != std::string::npos) {
    return Problem{"invalid_field",
                   Quoted(name) + " contains a NUL character (\\u0000); remove it"};
  }
  *prompt = s;
  return std::nullopt;
}

std::optional<Problem> CheckSampling(const Json& obj, SamplingParams* p,
                                     std::initializer_list<const char*> max_tokens_names) {
  const auto field = [&](const char* name) -> const Json* {
    const auto it = obj.find(name);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  };
  const auto bad = [](const char* name, const std::string& rule, const Json& v) {
    return Problem{"invalid_field", Quoted(name) + " must be " + rule + ", got " + Describe(v)};
  };
  int64_t i = 0;
  for (const char* name : max_tokens_names) {
    const Json* v = field(name);
    if (v == nullptr) continue;
    if (!GetInteger(*v, 1, kMaxTokensLimit, nullptr, &i)) {
      return Problem{"invalid_max_tokens", Quoted(name) + " must be an integer in [1, " +
                                               std::to_string(kMaxTokensLimit) + "], got " +
                                               Describe(*v)};
    }
    p->max_tokens = static_cast<int>(i);
    break;
  }
  if (const Json* v = field("temperature")) {
    const double t = v->is_number() ? v->get<double>() : -1.0;
    if (!(t >= 0.0 && t <= 2.0)) return bad("temperature", "a number in [0, 2]", *v);
    p->temperature = static_cast<float>(t);
  }
  if (const Json* v = field("top_p")) {
    const double t = v->is_number() ? v->get<double>() : -1.0;
    if (!(t > 0.0 && t <= 1.0)) return bad("top_p", "a number in (0, 1]", *v);
    p->top_p = static_cast<float>(t);
  }
  if (const Json* v = field("top_k")) {
    if (!GetInteger(*v, -1, std::numeric_limits<int>::max(), nullptr, &i)) {
      return bad("top_k", "an integer >= -1 (0 or -1 turn it off)", *v);
    }
    p->top_k = static_cast<int>(i);
  }
  if (const Json* v = field("seed")) {
    uint64_t seed = 0;
    if (!GetInteger(*v, 0, std::numeric_limits<uint64_t>::max(), &seed, nullptr)) {
      return bad("seed", "a non-negative integer below 2^64", *v);
    }
    p->seed = seed;
  }
  if (const Json* v = field("stop")) {
    if (auto problem = CheckStop(*v, &p->stop)) return problem;
  }
  if (const Json* v = field("ignore_eos")) {
    if (!v->is_boolean()) return bad("ignore_eos", "true or false", *v);
    p->ignore_eos = v->get<bool>();
  }
  return std::nullopt;
}

}  // namespace strata::request_fields
