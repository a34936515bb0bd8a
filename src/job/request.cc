#include "src/job/request.h"

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/job/openai_output.h"
#include "src/job/openai_request.h"
#include "src/job/request_fields.h"
#include "src/job/utf8.h"

namespace strata {
namespace {

using Json = nlohmann::json;
using request_fields::CheckCustomId;
using request_fields::Problem;

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

// True when the object is an OpenAI Batch API line rather than a plain one.
bool LooksLikeOpenAi(const Json& obj) {
  return obj.contains("body") || obj.contains("url") || obj.contains("method");
}

// What can still be read from a line that failed the UTF-8 or NUL check: bad bytes are replaced
// so that they cannot break the JSON, and an id that held one is refused.
struct Salvage {
  std::string custom_id;
  bool is_object = false;
  RequestFormat format = RequestFormat::kPlain;
};

Salvage SalvageLine(std::string_view line) {
  std::string repaired;
  for (char c : ReplaceInvalidUtf8(line)) {
    if (c == '\0') {
      repaired += "\\u0000";
    } else {
      repaired += c;
    }
  }
  const Json j = Json::parse(repaired, nullptr, false);
  Salvage out;
  if (j.is_discarded() || !j.is_object()) return out;
  out.is_object = true;
  out.format = LooksLikeOpenAi(j) ? RequestFormat::kOpenAiCompletion : RequestFormat::kPlain;
  std::string id;
  if (!CheckCustomId(j, &id).has_value() && id.find("\xEF\xBF\xBD") == std::string::npos) {
    out.custom_id = std::move(id);
  }
  return out;
}

std::optional<Problem> CheckPrompt(const Json& obj, std::string* prompt) {
  const auto it = obj.find("prompt");
  if (it == obj.end()) {
    return Problem{"missing_prompt", "\"prompt\" is missing; every line needs a string prompt"};
  }
  return request_fields::CheckPromptText(*it, "prompt", prompt);
}

const char* JsonTypeName(const Json& j) {
  if (j.is_array()) return "an array";
  if (j.is_string()) return "a string";
  if (j.is_number()) return "a number";
  if (j.is_boolean()) return "a boolean";
  return "null";
}

}  // namespace

bool IsOpenAi(RequestFormat f) { return f != RequestFormat::kPlain; }

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
  const auto fail_salvaged = [&](const char* code, std::string message) {
    Salvage s = SalvageLine(line);
    out.is_object = s.is_object;
    out.error = RequestError{std::move(s.custom_id), line_number, code, std::move(message),
                             s.format};
    return out;
  };
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
    return fail("", "empty_line",
                "the line is empty; every input line is one request: remove the line or put a "
                "request on it");
  }
  if (const auto bad = FindInvalidUtf8(line)) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(line[*bad]));
    return fail_salvaged("invalid_utf8",
                         "byte " + std::string(hex) + " at offset " + std::to_string(*bad) +
                             " of the line is not UTF-8; re-encode the input file as UTF-8");
  }
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
    return fail_salvaged("invalid_json",
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
  if (LooksLikeOpenAi(j)) return ParseOpenAiRequest(j, line_number);
  out.is_object = true;
  Request request;
  request.line_number = line_number;
  if (auto problem = CheckCustomId(j, &request.custom_id)) {
    return fail("", problem->code, std::move(problem->message));
  }
  auto problem = CheckPrompt(j, &request.prompt);
  if (!problem) problem = request_fields::CheckSampling(j, &request.sampling);
  if (problem) return fail(std::move(request.custom_id), problem->code, std::move(problem->message));
  out.request = std::move(request);
  return out;
}

std::string FormatCompletionLine(const Completion& c, std::string_view model) {
  if (IsOpenAi(c.format)) return FormatOpenAiCompletionLine(c, model);
  nlohmann::ordered_json j;
  j["custom_id"] = c.custom_id;
  j["text"] = c.text;
  j["prompt_tokens"] = c.prompt_tokens;
  j["completion_tokens"] = c.completion_tokens;
  j["finish_reason"] = FinishReasonName(c.finish_reason);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string FormatErrorLine(const RequestError& e) {
  if (IsOpenAi(e.format)) return FormatOpenAiErrorLine(e);
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
