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

// Jinja's trim and Python's str.strip() on ASCII whitespace.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// The expressions that identify the [INST] templates (see the header), as their
// tokenizer_config.json files write them.
constexpr std::string_view kLlama2User = "bos_token + '[INST] ' + content.strip() + ' [/INST]'";
constexpr std::string_view kLlama2Assistant = "' '  + content.strip() + ' ' + eos_token";
constexpr std::string_view kMistralStart = "{{ bos_token }}";
constexpr std::string_view kMistralUser = "{{ '[INST] ' + message['content'] + ' [/INST]' }}";
constexpr std::string_view kMistralV01Assistant = "{{ message['content'] + eos_token + ' ' }}";
constexpr std::string_view kMixtralAssistant = "{{ message['content'] + eos_token}}";
constexpr std::string_view kPhi4User =
    "'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}";
constexpr std::string_view kPhi4UserThenPrompt =
    "'<|im_start|>user<|im_sep|>' + message['content'] + "
    "'<|im_end|><|im_start|>assistant<|im_sep|>'}}";
constexpr std::string_view kPhi4Prompt = "{{ '<|im_start|>assistant<|im_sep|>' }}";

// How a Phi-3 template renders (ChatTemplate's members of the same names).
struct Phi3Style {
  bool any_role = false, prompt_after_user = false, skip_empty_system = false,
       prompt_after_assistant = true;
};

// The Phi-3 templates strata renders, each whole (newlines as Unescape leaves them): Phi-3.5-mini
// (an empty system message is left out), Phi-3-mini's later revisions, Phi-3-mini's first one
// and Phi-3-medium (the assistant's opening after every user message, system messages dropped),
// Phi-3-small and Phi-3-vision (any role's tag; vision writes no opening after a last assistant
// message).
const std::vector<std::pair<std::string, Phi3Style>>& Phi3Templates() {
  static const auto* templates = new std::vector<std::pair<std::string, Phi3Style>>{
      {"{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
       "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' "
       "%}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == "
       "'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}"
       "{{ eos_token }}{% endif %}",
       {.skip_empty_system = true}},
      {"{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
       "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' "
       "+ message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
       "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
       "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}"
       "{% endif %}",
       {}},
      {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
       "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}"
       "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}"
       "{% endif %}{% endfor %}",
       {.prompt_after_user = true}},
      {"{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
       "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif "
       "(message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}"
       "{% endfor %}",
       {.prompt_after_user = true}},
      {"{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + "
       "message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
       {.any_role = true}},
      {"{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] "
       "+ '<|end|>\n' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != "
       "'assistant' %}{{- '<|assistant|>\n' -}}{% endif %}",
       {.any_role = true, .prompt_after_assistant = false}},
  };
  return *templates;
}

// The style of `jinja` when it is one of Phi3Templates(); nullptr otherwise.
const Phi3Style* Phi3StyleOf(std::string_view jinja) {
  const std::string unescaped = Unescape(jinja);
  const std::string_view text = Trim(unescaped);
  for (const auto& [known, style] : Phi3Templates()) {
    if (text == known) return &style;
  }
  return nullptr;
}

}  // namespace

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja, std::string bos, std::string eos) {
  ChatTemplate t;
  if (jinja.empty()) return t;
  t.adds_bos_ = Contains(jinja, "bos_token");
  const bool tokens = !bos.empty() && !eos.empty();
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|eot_id|>")) {
    t.family_ = Family::kLlama3;
  } else if (Contains(jinja, kPhi4User) && Contains(jinja, kPhi4Prompt)) {
    t.family_ = Family::kPhi4;
  } else if (Contains(jinja, kPhi4UserThenPrompt)) {
    t.family_ = Family::kPhi4;
    t.prompt_after_user_ = true;
  } else if (const Phi3Style* style = Phi3StyleOf(jinja)) {
    t.family_ = Family::kPhi3;
    t.any_role_ = style->any_role;
    t.prompt_after_user_ = style->prompt_after_user;
    t.skip_empty_system_ = style->skip_empty_system;
    t.prompt_after_assistant_ = style->prompt_after_assistant;
  } else if (Contains(jinja, "<|im_start|>") && Contains(jinja, "<|im_end|>") &&
             !Contains(jinja, "<|im_sep|>")) {  // another <|im_sep|> template is not ChatML
    t.family_ = Family::kChatMl;
    t.default_system_ = LiteralChatMlSystem(jinja);
  } else if (tokens && Contains(jinja, "<<SYS>>") && Contains(jinja, kLlama2User) &&
             Contains(jinja, kLlama2Assistant)) {
    t.family_ = Family::kLlama2;
  } else if (tokens && jinja.starts_with(kMistralStart) && Contains(jinja, kMistralUser) &&
             (Contains(jinja, kMistralV01Assistant) || Contains(jinja, kMixtralAssistant))) {
    t.family_ = Family::kMistral;
    t.after_eos_ = Contains(jinja, kMistralV01Assistant) ? " " : "";
  } else {
    t.family_ = Family::kUnknown;
  }
  t.bos_ = std::move(bos);
  t.eos_ = std::move(eos);
  return t;
}

const char* ChatTemplate::name() const {
  switch (family_) {
    case Family::kNone: return "none";
    case Family::kUnknown: return "unrecognised";
    case Family::kChatMl: return "ChatML";
    case Family::kLlama3: return "Llama 3";
    case Family::kLlama2:
      return "Llama 2";
    case Family::kMistral:
      return "Mistral";
    case Family::kPhi3:
      return "Phi-3";
    case Family::kPhi4:
      return "Phi-4";
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
          "the model's chat template is not one strata can render (it knows ChatML, Llama 3, "
          "Llama 2, Mistral v0.1, Phi-3 and Phi-4); send /v1/completions requests with the prompt "
          "already formatted");
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
    case Family::kLlama2:
    case Family::kMistral:
      return RenderInst(messages);
    case Family::kPhi4:
      for (const ChatMessage& m : messages) {
        if (m.role != "system" && m.role != "user" && m.role != "assistant") {
          return Status::Unsupported("the model's chat template (Phi-4) has no '" + m.role +
                                     "' messages; it takes system, user and assistant ones");
        }
        if (prompt_after_user_ && m.role == "assistant") {
          out += m.content + "<|im_end|>";
        } else {
          out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
          if (prompt_after_user_ && m.role == "user") out += "<|im_start|>assistant<|im_sep|>";
        }
      }
      if (!prompt_after_user_) out += "<|im_start|>assistant<|im_sep|>";
      return out;
    case Family::kPhi3:
      return RenderPhi3(messages);
  }
  return Status::Unsupported("unknown chat template family");
}

Result<std::string> ChatTemplate::RenderPhi3(const std::vector<ChatMessage>& messages) const {
  std::string out;
  for (const ChatMessage& m : messages) {
    const bool takes = any_role_ || m.role == "user" || m.role == "assistant" ||
                       (m.role == "system" && !prompt_after_user_);
    if (!takes) {
      return Status::Unsupported(
          "the model's chat template (Phi-3) has no '" + m.role + "' messages; it takes " +
          (prompt_after_user_ ? "user and assistant ones" : "system, user and assistant ones"));
    }
    if (skip_empty_system_ && m.role == "system" && m.content.empty()) continue;
    if (prompt_after_user_ && m.role == "assistant") {
      out += m.content + "<|end|>\n";
      continue;
    }
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    if (prompt_after_user_ && m.role == "user") out += "<|assistant|>\n";
  }
  if (!prompt_after_user_ && (prompt_after_assistant_ || messages.back().role != "assistant")) {
    out += "<|assistant|>\n";
  }
  return out;
}

Result<std::string> ChatTemplate::RenderInst(const std::vector<ChatMessage>& messages) const {
  const bool llama2 = family_ == Family::kLlama2;
  size_t first = 0;
  std::string system;
  if (messages.front().role == "system") {
    if (!llama2) {
      return Status::Unsupported(
          "the model's chat template (Mistral) takes no system message; put its text in the "
          "first user message");
    }
    system = messages.front().content;
    first = 1;
  }
  if (first == messages.size()) return Status::Unsupported("the chat has no user message");
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool user_turn = (i - first) % 2 == 0;
    if (m.role != (user_turn ? "user" : "assistant")) {
      return Status::Unsupported(std::string("the model's chat template (") + name() +
                                 ") takes user and assistant messages, alternating from a user "
                                 "one; message " +
                                 std::to_string(i + 1) + " is '" + m.role + "'");
    }
    // Every BOS but the prompt's first is text (the caller encodes that one by its id).
    const std::string bos = i == first ? std::string() : bos_;
    if (llama2) {
      std::string content = m.content;
      if (i == first && messages.front().role == "system") {
        content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      }
      out += user_turn ? bos + "[INST] " + std::string(Trim(content)) + " [/INST]"
                       : " " + std::string(Trim(content)) + " " + eos_;
    } else {
      out += user_turn ? "[INST] " + m.content + " [/INST]" : m.content + eos_ + after_eos_;
    }
  }
  return out;
}

}  // namespace strata
