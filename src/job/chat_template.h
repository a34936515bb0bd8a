// ChatTemplate: renders the messages of a chat request into a prompt the way a model's Jinja chat
// template (GGUF tokenizer.chat_template, tokenizer_config.json chat_template) would, with the
// assistant's generation prompt appended. strata has no Jinja engine: it recognises template
// families from the template text and renders them in C++.
//
//   ChatML   (<|im_start|> ... <|im_end|>, without <|im_sep|>; SmolLM2, Qwen):
//            "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then
//            "<|im_start|>assistant\n". When the template writes a default system prompt as a
//            literal (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging
//            Face"), it is added as the first message unless the first message is "system".
//   Llama 3  (<|start_header_id|> ... <|eot_id|>):
//            "<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>" per
//            message, then "<|start_header_id|>assistant<|end_header_id|>\n\n". Llama 3.1's
//            dated default system block is not written (as llama.cpp does).
//   Llama 2  (meta-llama/Llama-2-*-chat-hf): "{bos}[INST] {content, stripped} [/INST]" per user
//            message, " {content, stripped} {eos}" per assistant one, a system message's text
//            put before the first user message as "<<SYS>>\n{system}\n<</SYS>>\n\n".
//   Mistral  (Mistral-7B-Instruct-v0.1, Mixtral-8x7B-Instruct-v0.1): "{bos}", then
//            "[INST] {content} [/INST]" per user message and "{content}{eos}" per assistant one
//            (v0.1 adds a space after the eos); no system message.
//            Both [INST] families take user and assistant messages alternating from a user one,
//            as their templates demand, and add nothing after the last message. They are
//            recognised by the exact expressions of those templates only: later Mistral
//            templates place system prompts and spaces differently and stay unrecognised.
//   Phi-3    (Phi-3-mini, -small, -medium, -vision, Phi-3.5-mini): "<|{role}|>\n{content}<|end|>\n"
//            per message, then "<|assistant|>\n". Recognised only as the six whole templates
//            these models shipped (chat_template.cc), which differ: Phi-3.5 leaves an empty
//            system message out; Phi-3-mini's first template and Phi-3-medium's write the
//            assistant's opening after every user message and assistant messages without their
//            tag, and drop system messages (refused here); Phi-3-small and Phi-3-vision tag any
//            role, and vision writes no opening after a last assistant message. The others
//            refuse roles other than system, user and assistant, which they would drop.
//   Phi-4    (microsoft/phi-4): "<|im_start|>{role}<|im_sep|>{content}<|im_end|>" per system,
//            user or assistant message, then "<|im_start|>assistant<|im_sep|>". Its later
//            template writes that opening after every user message instead, the same prompt
//            unless the chat ends with an assistant message. Other roles are refused, where the
//            template would drop them.
//
// The first BOS is never written as text: a template that writes bos_token sets adds_bos(), and
// the caller encodes the prompt with the tokenizer's BOS id, as transformers does after
// rendering. BOS and EOS later in a Llama 2 or Mistral prompt are written as the tokens' text,
// which the tokenizer encodes as the special tokens.
// Thread-safe after construction (immutable).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"
#include "src/job/request.h"

namespace strata {

class ChatTemplate {
 public:
  enum class Family { kNone, kUnknown, kChatMl, kLlama3, kLlama2, kMistral, kPhi3, kPhi4 };

  // A template that renders nothing: every chat request gets unsupported_chat_template.
  ChatTemplate() = default;

  // Recognises the family of `jinja`; an empty string is kNone, text of no known family kUnknown.
  // `bos` and `eos` are the text of the tokenizer's BOS and EOS tokens; the [INST] families need
  // both (without them they are kUnknown).
  static ChatTemplate FromJinja(std::string_view jinja, std::string bos = "", std::string eos = "");

  Family family() const { return family_; }
  // The system prompt added when the first message is not "system"; empty when none.
  const std::string& default_system() const { return default_system_; }
  // True when the template starts the prompt with bos_token.
  bool adds_bos() const { return adds_bos_; }
  // "ChatML", "Llama 3", "Llama 2", "Mistral", "Phi-3", "Phi-4", "none" or "unrecognised".
  const char* name() const;

  // The prompt for `messages`, generation prompt included. REQUIRES: `messages` non-empty.
  // Errors: Unsupported, with a message for the user, when the family is kNone or kUnknown.
  Result<std::string> Render(const std::vector<ChatMessage>& messages) const;

 private:
  Result<std::string> RenderInst(const std::vector<ChatMessage>& messages) const;
  Result<std::string> RenderPhi3(const std::vector<ChatMessage>& messages) const;

  Family family_ = Family::kNone;
  std::string default_system_;
  bool adds_bos_ = false;
  std::string bos_, eos_;
  std::string after_eos_;           // Mistral v0.1: " "
  bool prompt_after_user_ = false;  // Phi-4's later template; Phi-3-mini's first, Phi-3-medium
  bool any_role_ = false;           // Phi-3-small, Phi-3-vision: any role's tag
  bool skip_empty_system_ = false;  // Phi-3.5
  bool prompt_after_assistant_ = true;  // false: Phi-3-vision
};

}  // namespace strata
