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
  EXPECT_NE(p.status().message().find("ChatML, Llama 3"), std::string::npos);

  // ChatML's tokens with another separator are not ChatML.
  const ChatTemplate sep = ChatTemplate::FromJinja(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + "
      "message['content'] + '<|im_end|>'}}{% endfor %}");
  EXPECT_EQ(sep.family(), ChatTemplate::Family::kUnknown);
}

// The [INST] templates as the models' tokenizer_config.json files carry them (the same text is in
// llama.cpp's tests/test-chat-template.cpp). Expected prompts below were rendered from these
// templates by jinja2 as transformers configures it (sandboxed, trim_blocks, lstrip_blocks;
// bos_token "<s>", eos_token "</s>"), minus the leading "<s>" strata encodes by its id; the
// standard conversation's also equal llama.cpp's expected outputs.
const std::string kLlama2Chat =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
    "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
    "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 "
    "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] "
    "%}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}";

const std::string kMistralAlternation =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}";
const std::string kMistralEnd =
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif "
    "%}{% endfor %}";
const std::string kMistral01 =
    kMistralAlternation + "{{ message['content'] + eos_token + ' ' }}" + kMistralEnd;
const std::string kMixtral =
    kMistralAlternation + "{{ message['content'] + eos_token}}" + kMistralEnd;

const std::vector<ChatMessage> kStandardChat = Chat({{"system", "You are a helpful assistant"},
                                                     {"user", "Hello"},
                                                     {"assistant", "Hi there"},
                                                     {"user", "Who are you"},
                                                     {"assistant", "   I am an assistant   "},
                                                     {"user", "Another question"}});

TEST(ChatTemplateTest, Llama2ChatAsItsTemplateRendersIt) {
  const ChatTemplate t = ChatTemplate::FromJinja(kLlama2Chat, "<s>", "</s>");
  EXPECT_EQ(t.family(), ChatTemplate::Family::kLlama2);
  EXPECT_TRUE(t.adds_bos());
  EXPECT_EQ(*t.Render(kStandardChat),
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there "
            "</s><s>[INST] Who are you [/INST] I am an assistant </s><s>[INST] Another question "
            "[/INST]");
  EXPECT_EQ(*t.Render(Chat({{"user", "  What is 2+2?\n"}})), "[INST] What is 2+2? [/INST]");
  EXPECT_EQ(*t.Render(Chat({{"system", " Be brief. "}, {"user", "Hi"}})),
            "[INST] <<SYS>>\n Be brief. \n<</SYS>>\n\nHi [/INST]");
  EXPECT_EQ(*t.Render(Chat({{"user", "a"}, {"assistant", "b\n"}})), "[INST] a [/INST] b </s>");
  const Result<std::string> twice = t.Render(Chat({{"user", "a"}, {"user", "b"}}));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("alternating"), std::string::npos);
  EXPECT_FALSE(t.Render(Chat({{"system", "s"}})).ok());
}

TEST(ChatTemplateTest, MistralV01AndMixtralDifferOnlyAfterEos) {
  const std::vector<ChatMessage> chat(kStandardChat.begin() + 1, kStandardChat.end());
  const ChatTemplate v01 = ChatTemplate::FromJinja(kMistral01, "<s>", "</s>");
  EXPECT_EQ(v01.family(), ChatTemplate::Family::kMistral);
  EXPECT_TRUE(v01.adds_bos());
  EXPECT_EQ(*v01.Render(chat),
            "[INST] Hello [/INST]Hi there</s> [INST] Who are you [/INST]   I am an assistant   "
            "</s> [INST] Another question [/INST]");
  EXPECT_EQ(*v01.Render(Chat({{"user", "  What is 2+2?\n"}})), "[INST]   What is 2+2?\n [/INST]");
  EXPECT_EQ(*v01.Render(Chat({{"user", "a"}, {"assistant", "b\n"}})), "[INST] a [/INST]b\n</s> ");
  const ChatTemplate mixtral = ChatTemplate::FromJinja(kMixtral, "<s>", "</s>");
  EXPECT_EQ(mixtral.family(), ChatTemplate::Family::kMistral);
  EXPECT_EQ(*mixtral.Render(chat),
            "[INST] Hello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   "
            "</s>[INST] Another question [/INST]");
  EXPECT_EQ(*mixtral.Render(Chat({{"user", "a"}, {"assistant", "b\n"}})),
            "[INST] a [/INST]b\n</s>");
  for (const ChatTemplate* t : {&v01, &mixtral}) {
    EXPECT_FALSE(t->Render(Chat({{"system", " Be brief. "}, {"user", "Hi"}})).ok());
    EXPECT_FALSE(t->Render(Chat({{"user", "a"}, {"user", "b"}})).ok());
  }
}

// microsoft/phi-4's template, and the later one (as in llama.cpp's tests/test-chat-template.cpp)
// that opens the assistant's turn after every user message. Expected prompts rendered by jinja2
// as above.
const std::string kPhi4 =
    "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system"
    "<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}"
    "{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif "
    "(message['role'] == 'assistant') %}{{'<|im_start|>assistant<|im_sep|>' + message['content'] "
    "+ '<|im_end|>'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant<|im_sep|>' }}{% endif %}";
const std::string kPhi4Later =
    "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system"
    "<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}"
    "{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|><|im_start|>assistant"
    "<|im_sep|>'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + "
    "'<|im_end|>'}}{% endif %}{% endfor %}";

TEST(ChatTemplateTest, Phi4BothTemplatesAsTheyRender) {
  const std::string standard =
      "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user"
      "<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user"
      "<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   "
      "<|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant"
      "<|im_sep|>";
  const ChatTemplate first = ChatTemplate::FromJinja(kPhi4);
  const ChatTemplate later = ChatTemplate::FromJinja(kPhi4Later);
  for (const ChatTemplate* t : {&first, &later}) {
    EXPECT_EQ(t->family(), ChatTemplate::Family::kPhi4);
    EXPECT_FALSE(t->adds_bos());
    EXPECT_EQ(*t->Render(kStandardChat), standard);
    const Result<std::string> tool = t->Render(Chat({{"user", "a"}, {"tool", "b"}}));
    ASSERT_FALSE(tool.ok());
    EXPECT_NE(tool.status().message().find("'tool'"), std::string::npos);
  }
  const std::vector<ChatMessage> ends = Chat({{"user", "a"}, {"assistant", "b\n"}});
  EXPECT_EQ(*first.Render(ends),
            "<|im_start|>user<|im_sep|>a<|im_end|><|im_start|>assistant<|im_sep|>b\n<|im_end|>"
            "<|im_start|>assistant<|im_sep|>");
  EXPECT_EQ(*later.Render(ends),
            "<|im_start|>user<|im_sep|>a<|im_end|><|im_start|>assistant<|im_sep|>b\n<|im_end|>");
}

// The six Phi-3 templates strata renders (chat_template.h): Phi-3.5-mini's and Phi-3-mini's later
// revision as projects that ship them quote them, the others as in llama.cpp's
// tests/test-chat-template.cpp. Expected prompts rendered by jinja2 as transformers sets it up,
// BOS "<s>" left out (it is encoded by its id). Vision's is written with Jinja's "\\n" escapes,
// the others with newlines as a tokenizer_config.json holds them once parsed.
const std::string kPhi35Mini =
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}"
    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' "
    "%}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";
const std::string kPhi3MiniLater =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>"
    "\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";
const std::string kPhi3MiniFirst =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>'"
    " + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif "
    "(message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}"
    "{% endfor %}";
const std::string kPhi3Small =
    "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + "
    "message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";
const std::string kPhi3Medium =
    "{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
    "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] "
    "== 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}";
const std::string kPhi3Vision =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] "
    "+ '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != "
    "'assistant' %}{{- '<|assistant|>\\n' -}}{% endif %}";

TEST(ChatTemplateTest, Phi3TemplatesAsTheyRender) {
  const std::string standard =
      "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
      "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>"
      "\n<|user|>\nAnother question<|end|>\n<|assistant|>\n";
  const std::string standard_without_system = standard.substr(standard.find("<|user|>"));
  const std::vector<ChatMessage> no_system(kStandardChat.begin() + 1, kStandardChat.end());
  const std::vector<ChatMessage> empty_system = Chat({{"system", ""}, {"user", "Hi"}});
  const std::vector<ChatMessage> ends = Chat({{"user", "a"}, {"assistant", "b\n"}});
  const std::vector<ChatMessage> tool = Chat({{"user", "a"}, {"tool", "b"}});
  const std::string ends_open = "<|user|>\na<|end|>\n<|assistant|>\nb\n<|end|>\n";
  struct Case {
    const std::string* jinja;
    bool bos, takes_system, any_role, skips_empty_system, opens_after_assistant;
  };
  for (const Case& c : {Case{&kPhi35Mini, false, true, false, true, true},
                        Case{&kPhi3MiniLater, false, true, false, false, true},
                        Case{&kPhi3MiniFirst, true, false, false, false, false},
                        Case{&kPhi3Small, true, true, true, false, true},
                        Case{&kPhi3Medium, false, false, false, false, false},
                        Case{&kPhi3Vision, false, true, true, false, false}}) {
    SCOPED_TRACE(*c.jinja);
    const ChatTemplate t = ChatTemplate::FromJinja(*c.jinja, "<s>", "<|endoftext|>");
    ASSERT_EQ(t.family(), ChatTemplate::Family::kPhi3);
    EXPECT_EQ(t.adds_bos(), c.bos);
    EXPECT_EQ(*t.Render(no_system), standard_without_system);
    EXPECT_EQ(*t.Render(ends), c.opens_after_assistant ? ends_open + "<|assistant|>\n" : ends_open);
    if (c.takes_system) {
      EXPECT_EQ(*t.Render(kStandardChat), standard);
      EXPECT_EQ(*t.Render(empty_system),
                c.skips_empty_system ? "<|user|>\nHi<|end|>\n<|assistant|>\n"
                                     : "<|system|>\n<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
    } else {  // the template would drop it
      EXPECT_FALSE(t.Render(kStandardChat).ok());
      EXPECT_FALSE(t.Render(empty_system).ok());
    }
    const Result<std::string> tool_prompt = t.Render(tool);
    if (c.any_role) {
      EXPECT_EQ(*tool_prompt, "<|user|>\na<|end|>\n<|tool|>\nb<|end|>\n<|assistant|>\n");
    } else {
      ASSERT_FALSE(tool_prompt.ok());
      EXPECT_NE(tool_prompt.status().message().find("'tool'"), std::string::npos);
    }
  }
  // Another Phi-3 text, even one expression off, is not rendered.
  std::string edited = kPhi3Small;
  edited.replace(edited.find("<|end|>"), 7, "<|endoftext|>");
  EXPECT_EQ(ChatTemplate::FromJinja(edited).family(), ChatTemplate::Family::kUnknown);
}

// Without BOS and EOS texts, or with another Mistral template's expressions, nothing renders.
TEST(ChatTemplateTest, InstTemplatesNeedTheirExactExpressionsAndTokens) {
  EXPECT_EQ(ChatTemplate::FromJinja(kLlama2Chat).family(), ChatTemplate::Family::kUnknown);
  EXPECT_EQ(ChatTemplate::FromJinja(kMixtral, "<s>", "").family(), ChatTemplate::Family::kUnknown);
  // Mistral-7B-Instruct-v0.3's opening: system prompt before the last user message, no spaces.
  const ChatTemplate v03 = ChatTemplate::FromJinja(
      "{{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}"
      "{%- if loop.last and system_message is defined %}{{- '[INST] ' + system_message + "
      "'\\n\\n' + message['content'] + '[/INST]' }}{%- else %}{{- '[INST] ' + "
      "message['content'] + '[/INST]' }}{%- endif %}",
      "<s>", "</s>");
  EXPECT_EQ(v03.family(), ChatTemplate::Family::kUnknown);
}

}  // namespace
}  // namespace strata
