#include "src/job/openai_output.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/job/stable_hash.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;

std::string Hex16(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string FormatOpenAiCompletionLine(const Completion& c, std::string_view model) {
  const std::string h = Hex16(Mix64(Fnv1a64(c.custom_id)));
  const bool chat = c.format == RequestFormat::kOpenAiChat;
  Json choice;
  choice["index"] = 0;
  if (chat) {
    choice["message"]["role"] = "assistant";
    choice["message"]["content"] = c.text;
  } else {
    choice["text"] = c.text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishReasonName(c.finish_reason);
  Json body;
  body["id"] = (chat ? "chatcmpl-" : "cmpl-") + h;
  body["object"] = chat ? "chat.completion" : "text_completion";
  body["model"] = model;
  body["choices"] = Json::array({choice});
  body["usage"]["prompt_tokens"] = c.prompt_tokens;
  body["usage"]["completion_tokens"] = c.completion_tokens;
  body["usage"]["total_tokens"] = c.prompt_tokens + c.completion_tokens;
  Json j;
  j["id"] = "batch_req_" + h;
  j["custom_id"] = c.custom_id;
  j["response"]["status_code"] = 200;
  j["response"]["request_id"] = "req_" + h;
  j["response"]["body"] = std::move(body);
  j["error"] = nullptr;
  return Dump(j);
}

std::string FormatOpenAiErrorLine(const RequestError& e) {
  const std::string key = e.custom_id.empty() ? "line:" + std::to_string(e.line_number)
                                              : e.custom_id;
  const std::string h = Hex16(Mix64(Fnv1a64(key)));
  Json j;
  j["id"] = "batch_req_" + h;
  j["custom_id"] = e.custom_id.empty() ? Json(nullptr) : Json(e.custom_id);
  j["line"] = e.line_number;
  if (e.custom_id.empty()) {
    j["response"] = nullptr;
  } else {
    Json& r = j["response"];
    r["status_code"] = 400;
    r["request_id"] = "req_" + h;
    Json& err = r["body"]["error"];
    err["message"] = e.message;
    err["type"] = "invalid_request_error";
    err["param"] = nullptr;
    err["code"] = e.code;
  }
  j["error"]["code"] = e.code;
  j["error"]["message"] = e.message;
  return Dump(j);
}

}  // namespace strata
