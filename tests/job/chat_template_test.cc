#include "src/job/chat_template.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

// SmolLM2-135M-Instruct's template as its GGUF file carries it (real newlines in the literals).
const std::string kSmolLm2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2.5's, abridged; its literals escape newlines as "\n".
const std::string kQwen =
    R"({%- if tools %}{{- '<|im_start|>system\n' }}{%- if messages[0]['role'] == 'system' %})"
    R"({{- messages[0]['content'] }}{%- endif %}{%- else %}{%- if messages[0]['role'] == )"
    R"('system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }})"
    R"({%- else %}{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a )"
    R"(helpful assistant.<|im_end|>\n' }}{%- endif %}{%- endif %})";

// Meta-Llama-3-8B-Instruct's.
const std::string kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

std::vector<ChatMessage> Chat(std::vector<std::pair<std::string, std::string>> turns) {
  std::vector<ChatMessage> out;
  for (auto& [role, content] : turns) out.push_back({role, content});
  return out;
}

TEST(ChatTemplateTest, ChatMlWithTheDefaultModelsSystemPrompt) {
  const ChatTemplate t = ChatTemplate::FromJinja(kSmolLm2);
  EXPECT_EQ(t.family(), ChatTemplate::Family::kChatMl);
  EXPECT_FALSE(t.adds_bos());
  EXPECT_EQ(t.default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  Result<std::string> p = t.Render(Chat({{"user", "Hi"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A system message of the caller's replaces the default.
  p = t.Render(Chat({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"},
                     {"user", "Bye"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChatMlDefaultSystemFromEscapedLiteral) {
  const ChatTemplate t = ChatTemplate::FromJinja(kQwen);
  EXPECT_EQ(t.family(), ChatTemplate::Family::kChatMl);
  EXPECT_EQ(t.default_system(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

TEST(ChatTemplateTest, PlainChatMlHasNoDefaultSystem) {
  const ChatTemplate t = ChatTemplate::FromJinja(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
  EXPECT_EQ(t.family(), ChatTemplate::Family::kChatMl);
  EXPECT_EQ(t.default_system(), "");
  EXPECT_EQ(*t.Render(Chat({{"user", "x"}})),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Llama3TrimsContentAndAsksForBos) {
  const ChatTemplate t = ChatTemplate::FromJinja(kLlama3);
  EXPECT_EQ(t.family(), ChatTemplate::Family::kLlama3);
  EXPECT_TRUE(t.adds_bos());
  Result<std::string> p = t.Render(Chat({{"system", "Be brief. "}, {"user", "\n Hi  "}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p,
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, UnknownAndMissingTemplatesAreUnsupported) {
  const ChatTemplate none = ChatTemplate::FromJinja("");
  EXPECT_EQ(none.family(), ChatTemplate::Family::kNone);
  Result<std::string> p = none.Render(Chat({{"user", "x"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("no chat template"), std::string::npos);

  const ChatTemplate gemma = ChatTemplate::FromJinja(
      "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n"
      "{{ message['content'] }}<end_of_turn>\n{% endfor %}");
  EXPECT_EQ(gemma.family(), ChatTemplate::Family::kUnknown);
  p = gemma.Render(Chat({{"user", "x"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("ChatML and Llama 3"), std::string::npos);
}

}  // namespace
}  // namespace strata
