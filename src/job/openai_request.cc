#include "src/job/openai_request.h"

#include "src/job/request_fields.h"

namespace strata {
namespace {

using request_fields::CheckCustomId;
using request_fields::CheckPromptText;
using request_fields::CheckSampling;
using request_fields::Describe;
using request_fields::Json;
using request_fields::Problem;
using request_fields::Quoted;

constexpr const char* kCompletionsUrl = "/v1/completions";
constexpr const char* kChatUrl = "/v1/chat/completions";

std::optional<Problem> CheckCompletionPrompt(const Json& body, std::string* prompt) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    return Problem{"missing_prompt", "\"body\" has no \"prompt\"; /v1/completions needs one"};
  }
  if (it->is_array()) {
    if (it->size() != 1 || !(*it)[0].is_string()) {
      return Problem{"invalid_field",
                     "\"prompt\" must be a string or an array of one string, got an array of " +
                         std::to_string(it->size()) + " entries; write one line per prompt"};
    }
    return CheckPromptText((*it)[0], "prompt", prompt);
  }
  return CheckPromptText(*it, "prompt", prompt);
}

std::optional<Problem> CheckContent(const Json& v, size_t index, std::string* out) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  const auto bad = [&](const std::string& what) {
    return Problem{"invalid_messages", Quoted(where) + " " + what};
  };
  if (v.is_string()) {
    *out = v.get<std::string>();
  } else if (v.is_array()) {
    out->clear();
    for (const Json& part : v) {
      const auto type = part.is_object() ? part.find("type") : part.end();
      const auto text = part.is_object() ? part.find("text") : part.end();
      if (type == part.end() || *type != "text" || text == part.end() || !text->is_string()) {
        return bad("may only hold {\"type\": \"text\", \"text\": \"...\"} parts; strata runs "
                   "text models");
      }
      if (!out->empty()) *out += '\n';
      *out += text->get<std::string>();
    }
  } else {
    return bad("must be a string or an array of text parts, got " + Describe(v));
  }
  if (out->find('\0') != std::string::npos) return bad("contains a NUL character; remove it");
  return std::nullopt;
}

std::optional<Problem> CheckMessages(const Json& body, std::vector<ChatMessage>* messages) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return Problem{"invalid_messages",
                   "\"body\" needs \"messages\": a non-empty array of {\"role\", \"content\"}"};
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      return Problem{"invalid_messages", Quoted(where) + " must be an object, got " + Describe(m)};
    }
    const auto role = m.find("role");
    const auto content = m.find("content");
    if (role == m.end() || !role->is_string()) {
      return Problem{"invalid_messages", Quoted(where + ".role") + " must be a string"};
    }
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool") {
      return Problem{"invalid_messages", Quoted(where + ".role") + " is \"" + msg.role +
                                             "\"; use system, user, assistant or tool"};
    }
    if (content == m.end()) {
      return Problem{"invalid_messages", Quoted(where + ".content") + " is missing"};
    }
    if (auto problem = CheckContent(*content, i, &msg.content)) return problem;
    messages->push_back(std::move(msg));
  }
  return std::nullopt;
}

// True when `v` asks for nothing beyond what strata produces: null, false, 0, "", [], or the
// neutral value of the field.
bool IsNeutral(const char* name, const Json& v) {
  if (v.is_null() || v == false) return true;
  const std::string n = name;
  if (n == "n" || n == "best_of") return v == 1;
  if (n == "top_logprobs") return v == 0;
  if (n == "suffix") return v == "";
  if (n == "tools" || n == "functions") return v.is_array() && v.empty();
  if (n == "response_format") {
    const auto type = v.is_object() ? v.find("type") : v.end();
    return type != v.end() && *type == "text";
  }
  return false;
}

std::optional<Problem> CheckUnsupported(const Json& body) {
  for (const char* name : {"n", "best_of", "echo", "logprobs", "top_logprobs", "suffix", "tools",
                           "functions", "response_format"}) {
    const auto it = body.find(name);
    if (it != body.end() && !IsNeutral(name, *it)) {
      return Problem{"unsupported_field", Quoted(name) + " = " + it->dump() +
                                              " is not supported by strata; remove it (one "
                                              "completion per line, text only)"};
    }
  }
  return std::nullopt;
}

}  // namespace

ParsedLine ParseOpenAiRequest(const Json& obj, uint64_t line_number) {
  ParsedLine out;
  out.is_object = true;
  Request r;
  r.line_number = line_number;
  r.format = RequestFormat::kOpenAiCompletion;
  const auto fail = [&](Problem p) {
    out.error = RequestError{r.custom_id, line_number, p.code, std::move(p.message), r.format};
    return out;
  };
  if (auto p = CheckCustomId(obj, &r.custom_id)) return fail(std::move(*p));
  if (const auto m = obj.find("method"); m != obj.end() && *m != "POST") {
    return fail({"invalid_field", "\"method\" must be \"POST\", got " + m->dump()});
  }
  const auto url = obj.find("url");
  if (url == obj.end() || !url->is_string()) {
    return fail({"unsupported_url", std::string("\"url\" must be \"") + kCompletionsUrl +
                                        "\" or \"" + kChatUrl + "\""});
  }
  if (*url == kChatUrl) {
    r.format = RequestFormat::kOpenAiChat;
  } else if (*url != kCompletionsUrl) {
    return fail({"unsupported_url", "\"url\" " + url->dump() + " is not served by strata; use " +
                                        kCompletionsUrl + " or " + kChatUrl});
  }
  const auto body = obj.find("body");
  if (body == obj.end() || !body->is_object()) {
    return fail({"invalid_body", "\"body\" must be an object with the request, got " +
                                     (body == obj.end() ? std::string("nothing")
                                                        : Describe(*body))});
  }
  std::optional<Problem> p;
  if (r.format == RequestFormat::kOpenAiChat) {
    p = CheckMessages(*body, &r.messages);
    if (!p) p = CheckSampling(*body, &r.sampling, {"max_completion_tokens", "max_tokens"});
  } else {
    p = CheckCompletionPrompt(*body, &r.prompt);
    if (!p) p = CheckSampling(*body, &r.sampling);
  }
  if (!p) p = CheckUnsupported(*body);
  if (p) return fail(std::move(*p));
  out.request = std::move(r);
  return out;
}

}  // namespace strata
