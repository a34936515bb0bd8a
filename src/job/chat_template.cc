#include "src/job/chat_template.h"

namespace strata {
namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Jinja string literals write a newline either as itself or as the escape "\n".
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The first "<|im_start|>system\n<text><|im_end|>" whose <text> is a plain literal (no quotes or
// Jinja syntax, so not a message's content spliced in); empty when there is none.
std::string LiteralChatMlSystem(std::string_view jinja) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  constexpr std::string_view kEnd = "<|im_end|>";
  for (size_t at = jinja.find(kOpen); at != std::string_view::npos;
       at = jinja.find(kOpen, at + 1)) {
    std::string_view rest = jinja.substr(at + kOpen.size());
    if (rest.starts_with("\\n")) {
      rest.remove_prefix(2);
    } else if (rest.starts_with("\n")) {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    const size_t end = rest.find(kEnd);
    if (end == std::string_view::npos) continue;
    const std::string_view text = rest.substr(0, end);
    if (text.empty() || text.find_first_of("'\"{}") != std::string_view::npos) continue;
    return Unescape(text);
  }
  return "";
}

std::string_view Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\n\r");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\n\r") - begin + 1);
}

}  // namespace

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja) {
  ChatTemplate t;
  if (jinja.empty()) return t;
  t.adds_bos_ = Contains(jinja, "bos_token");
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|eot_id|>")) {
    t.family_ = Family::kLlama3;
  } else if (Contains(jinja, "<|im_start|>") && Contains(jinja, "<|im_end|>")) {
    t.family_ = Family::kChatMl;
    t.default_system_ = LiteralChatMlSystem(jinja);
  } else {
    t.family_ = Family::kUnknown;
  }
  return t;
}

const char* ChatTemplate::name() const {
  switch (family_) {
    case Family::kNone: return "none";
    case Family::kUnknown: return "unrecognised";
    case Family::kChatMl: return "ChatML";
    case Family::kLlama3: return "Llama 3";
  }
  return "unrecognised";
}

Result<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages) const {
  std::string out;
  switch (family_) {
    case Family::kNone:
      return Status::Unsupported(
          "the model has no chat template; send /v1/completions requests with the prompt "
          "already formatted");
    case Family::kUnknown:
      return Status::Unsupported(
          "the model's chat template is not one strata can render (it knows ChatML and "
          "Llama 3); send /v1/completions requests with the prompt already formatted");
    case Family::kChatMl:
      if (!default_system_.empty() && messages.front().role != "system") {
        out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      }
      for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      out += "<|im_start|>assistant\n";
      return out;
    case Family::kLlama3:
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += Trim(m.content);
        out += "<|eot_id|>";
      }
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
  }
  return Status::Unsupported("unknown chat template family");
}

}  // namespace strata
