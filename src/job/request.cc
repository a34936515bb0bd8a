#include "src/job/request.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "src/job/utf8.h"

namespace strata {
namespace {

using Json = nlohmann::json;

struct Problem {
  const char* code;
  std::string message;
};

// Records the first syntax error of a parse; every other event is accepted and dropped. Used
// only after Json::parse failed, to explain why.
class ParseErrorRecorder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    // what() reads "[json.exception.parse_error.101] parse error at line 1, column 7: syntax
    // error ..."; keep the part after the position, which is about this one line anyway.
    const std::string what = ex.what();
    const size_t cut = what.find("syntax error");
    message = what.substr(cut == std::string::npos ? 0 : cut) + " (at offset " +
              std::to_string(position) + ")";
    return false;
  }
  std::string message = "syntax error";
};

std::string Quoted(std::string_view field) {
  std::string out = "\"";
  out.append(field);
  out += '"';
  return out;
}

// "a string", "an array", or the number or literal itself, for "got ..." in messages.
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

std::optional<Problem> CheckPrompt(const Json& obj, std::string* prompt) {
  const auto it = obj.find("prompt");
  if (it == obj.end()) {
    return Problem{"missing_prompt", "\"prompt\" is missing; every line needs a string prompt"};
  }
  if (!it->is_string()) {
    return Problem{"invalid_field", "\"prompt\" must be a string, got " + Describe(*it) +
                                        "; write one line per prompt, as text"};
  }
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty()) return Problem{"empty_prompt", "\"prompt\" is empty; give it text"};
  if (s.find('\0') != std::string::npos) {
    return Problem{"invalid_field", "\"prompt\" contains a NUL character (\\u0000); remove it"};
  }
  *prompt = s;
  return std::nullopt;
}

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

// Reads the optional sampling fields; a missing or null field keeps its default.
std::optional<Problem> CheckSampling(const Json& obj, SamplingParams* p) {
  const auto field = [&](const char* name) -> const Json* {
    const auto it = obj.find(name);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  };
  const auto bad = [](const char* name, const std::string& rule, const Json& v) {
    return Problem{"invalid_field", Quoted(name) + " must be " + rule + ", got " + Describe(v)};
  };
  int64_t i = 0;
  if (const Json* v = field("max_tokens")) {
    if (!GetInteger(*v, 1, kMaxTokensLimit, nullptr, &i)) {
      return Problem{"invalid_max_tokens", "\"max_tokens\" must be an integer in [1, " +
                                               std::to_string(kMaxTokensLimit) + "], got " +
                                               Describe(*v)};
    }
    p->max_tokens = static_cast<int>(i);
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

// The custom_id of a line that failed the UTF-8 or NUL check, when the rest of it is readable:
// bad bytes are replaced so that they cannot break the JSON, and an id that held one is refused.
std::string RecoverCustomId(std::string_view line) {
  std::string repaired;
  for (char c : ReplaceInvalidUtf8(line)) {
    if (c == '\0') {
      repaired += "\\u0000";
    } else {
      repaired += c;
    }
  }
  const Json j = Json::parse(repaired, nullptr, false);
  std::string id;
  if (j.is_discarded() || !j.is_object() || CheckCustomId(j, &id).has_value()) return "";
  return id.find("\xEF\xBF\xBD") == std::string::npos ? id : "";
}

const char* JsonTypeName(const Json& j) {
  if (j.is_array()) return "an array";
  if (j.is_string()) return "a string";
  if (j.is_number()) return "a number";
  if (j.is_boolean()) return "a boolean";
  return "null";
}

}  // namespace

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
  }
  return "length";
}

ParsedLine ParseRequestLine(std::string_view line, uint64_t line_number) {
  ParsedLine out;
  const auto fail = [&](std::string custom_id, const char* code, std::string message) {
    out.error = RequestError{std::move(custom_id), line_number, code, std::move(message)};
    return out;
  };
  if (const auto bad = FindInvalidUtf8(line)) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(line[*bad]));
    return fail(RecoverCustomId(line), "invalid_utf8",
                "byte " + std::string(hex) + " at offset " + std::to_string(*bad) +
                    " of the line is not UTF-8; re-encode the input file as UTF-8");
  }
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
    return fail(RecoverCustomId(line), "invalid_json",
                "raw NUL byte at offset " + std::to_string(nul) +
                    " of the line; JSON does not allow it, remove it from the input");
  }
  const Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded()) {
    ParseErrorRecorder recorder;
    Json::sax_parse(line, &recorder);
    return fail("", "invalid_json",
                "not valid JSON: " + recorder.message + "; write one JSON object per line");
  }
  if (!j.is_object()) {
    return fail("", "not_an_object",
                std::string("the line is ") + JsonTypeName(j) +
                    ", not a JSON object; write {\"custom_id\": ..., \"prompt\": ...}");
  }
  Request request;
  request.line_number = line_number;
  if (auto problem = CheckCustomId(j, &request.custom_id)) {
    return fail("", problem->code, std::move(problem->message));
  }
  auto problem = CheckPrompt(j, &request.prompt);
  if (!problem) problem = CheckSampling(j, &request.sampling);
  if (problem) return fail(std::move(request.custom_id), problem->code, std::move(problem->message));
  out.request = std::move(request);
  return out;
}

std::string FormatCompletionLine(const Completion& c) {
  nlohmann::ordered_json j;
  j["custom_id"] = c.custom_id;
  j["text"] = c.text;
  j["prompt_tokens"] = c.prompt_tokens;
  j["completion_tokens"] = c.completion_tokens;
  j["finish_reason"] = FinishReasonName(c.finish_reason);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string FormatErrorLine(const RequestError& e) {
  nlohmann::ordered_json j;
  j["custom_id"] = e.custom_id.empty() ? nlohmann::ordered_json(nullptr)
                                       : nlohmann::ordered_json(e.custom_id);
  j["line"] = e.line_number;
  j["error"]["code"] = e.code;
  j["error"]["message"] = e.message;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

RequestError LineTooLongError(uint64_t line_number, size_t max_line_bytes) {
  return RequestError{"", line_number, "line_too_long",
                      "the line is longer than " + std::to_string(max_line_bytes) +
                          " bytes and was skipped; shorten the prompt or raise the line limit"};
}

}  // namespace strata
