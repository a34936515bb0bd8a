// The OpenAI Batch API line format: parsing requests and writing results.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "src/job/request.h"

namespace strata {
namespace {

using Json = nlohmann::json;

std::string Line(const std::string& url, const Json& body, const std::string& id = "r1") {
  return Json{{"custom_id", id}, {"method", "POST"}, {"url", url}, {"body", body}}.dump();
}

TEST(OpenAiRequestTest, CompletionLine) {
  const ParsedLine p = ParseRequestLine(
      Line("/v1/completions", {{"model", "x"}, {"prompt", "Hello"}, {"max_tokens", 5},
                               {"temperature", 0}, {"stop", "\n"}, {"seed", 3}, {"n", 1}}),
      4);
  ASSERT_TRUE(p.request) << p.error->message;
  EXPECT_EQ(p.request->format, RequestFormat::kOpenAiCompletion);
  EXPECT_EQ(p.request->custom_id, "r1");
  EXPECT_EQ(p.request->prompt, "Hello");
  EXPECT_EQ(p.request->sampling.max_tokens, 5);
  EXPECT_EQ(p.request->sampling.temperature, 0.0f);
  EXPECT_EQ(p.request->sampling.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(*p.request->sampling.seed, 3u);
  EXPECT_EQ(p.request->line_number, 4u);
  // An array of one prompt is the same request.
  const ParsedLine q = ParseRequestLine(Line("/v1/completions", {{"prompt", {"Hello"}}}), 1);
  ASSERT_TRUE(q.request);
  EXPECT_EQ(q.request->prompt, "Hello");
}

TEST(OpenAiRequestTest, ChatLine) {
  const Json messages = Json::array(
      {{{"role", "developer"}, {"content", "Be brief."}},
       {{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "a"}},
                                                   {{"type", "text"}, {"text", "b"}}})}}});
  const ParsedLine p = ParseRequestLine(
      Line("/v1/chat/completions",
           {{"messages", messages}, {"max_tokens", 9}, {"max_completion_tokens", 7}}),
      1);
  ASSERT_TRUE(p.request) << p.error->message;
  EXPECT_EQ(p.request->format, RequestFormat::kOpenAiChat);
  ASSERT_EQ(p.request->messages.size(), 2u);
  EXPECT_EQ(p.request->messages[0].role, "system");
  EXPECT_EQ(p.request->messages[1].content, "a\nb");
  EXPECT_EQ(p.request->sampling.max_tokens, 7);
  EXPECT_TRUE(p.request->prompt.empty());
}

struct BadCase {
  std::string line;
  std::string code;
  std::string piece;
};

TEST(OpenAiRequestTest, BadLinesNameTheProblem) {
  const Json user = Json::array({{{"role", "user"}, {"content", "hi"}}});
  const std::vector<BadCase> cases = {
      {Line("/v1/embeddings", {{"input", "x"}}), "unsupported_url", "/v1/embeddings"},
      {R"({"custom_id":"r1","body":{"prompt":"x"}})", "unsupported_url", "\"url\""},
      {R"({"custom_id":"r1","url":"/v1/completions"})", "invalid_body", "\"body\""},
      {R"({"custom_id":"r1","url":"/v1/completions","body":"x"})", "invalid_body", "a string"},
      {R"({"custom_id":"r1","method":"GET","url":"/v1/completions","body":{"prompt":"x"}})",
       "invalid_field", "POST"},
      {R"({"url":"/v1/completions","body":{"prompt":"x"}})", "invalid_custom_id", "missing"},
      {Line("/v1/completions", {{"max_tokens", 3}}), "missing_prompt", "prompt"},
      {Line("/v1/completions", {{"prompt", 5}}), "invalid_field", "\"prompt\""},
      {Line("/v1/completions", {{"prompt", {"a", "b"}}}), "invalid_field", "one line per prompt"},
      {Line("/v1/completions", {{"prompt", ""}}), "empty_prompt", "empty"},
      {Line("/v1/completions", {{"prompt", "x"}, {"max_tokens", -1}}), "invalid_max_tokens",
       "-1"},
      {Line("/v1/completions", {{"prompt", "x"}, {"temperature", 9}}), "invalid_field",
       "temperature"},
      {Line("/v1/completions", {{"prompt", "x"}, {"n", 2}}), "unsupported_field", "\"n\""},
      {Line("/v1/completions", {{"prompt", "x"}, {"logprobs", 5}}), "unsupported_field",
       "logprobs"},
      {Line("/v1/chat/completions", {{"prompt", "x"}}), "invalid_messages", "messages"},
      {Line("/v1/chat/completions", {{"messages", Json::array()}}), "invalid_messages",
       "non-empty"},
      {Line("/v1/chat/completions", {{"messages", {{{"role", "user"}}}}}), "invalid_messages",
       "content\" is missing"},
      {Line("/v1/chat/completions", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}),
       "invalid_messages", "wizard"},
      {Line("/v1/chat/completions",
            {{"messages", {{{"role", "user"},
                            {"content", {{{"type", "image_url"}, {"image_url", "u"}}}}}}}}),
       "invalid_messages", "text"},
      {Line("/v1/chat/completions", {{"messages", user}, {"max_completion_tokens", 0}}),
       "invalid_max_tokens", "max_completion_tokens"},
      {Line("/v1/chat/completions", {{"messages", user}, {"tools", {{{"type", "function"}}}}}),
       "unsupported_field", "tools"},
      {Line("/v1/chat/completions",
            {{"messages", user}, {"response_format", {{"type", "json_object"}}}}),
       "unsupported_field", "response_format"},
  };
  for (const BadCase& c : cases) {
    const ParsedLine p = ParseRequestLine(c.line, 2);
    ASSERT_TRUE(p.error) << c.line;
    EXPECT_EQ(p.error->code, c.code) << c.line;
    EXPECT_NE(p.error->message.find(c.piece), std::string::npos) << p.error->message;
    EXPECT_TRUE(IsOpenAi(p.error->format)) << c.line;
    EXPECT_TRUE(p.is_object);
  }
}

TEST(OpenAiOutputTest, CompletionLines) {
  Completion c{"r1", "Paris.", 6, 2, FinishReason::kStop, RequestFormat::kOpenAiCompletion};
  const Json j = Json::parse(FormatCompletionLine(c, "smol"));
  EXPECT_EQ(j["custom_id"], "r1");
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_EQ(j["response"]["status_code"], 200);
  const Json& body = j["response"]["body"];
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "smol");
  EXPECT_EQ(body["choices"][0]["text"], "Paris.");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"], (Json{{"prompt_tokens", 6}, {"completion_tokens", 2},
                                 {"total_tokens", 8}}));
  EXPECT_EQ(j["id"].get<std::string>().rfind("batch_req_", 0), 0u);
  // The same request gives the same bytes: ids come from the custom_id, not a clock.
  EXPECT_EQ(FormatCompletionLine(c, "smol"), FormatCompletionLine(c, "smol"));

  c.format = RequestFormat::kOpenAiChat;
  c.finish_reason = FinishReason::kLength;
  const Json chat = Json::parse(FormatCompletionLine(c, "smol"));
  EXPECT_EQ(chat["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(chat["response"]["body"]["choices"][0]["message"],
            (Json{{"role", "assistant"}, {"content", "Paris."}}));
  EXPECT_EQ(chat["response"]["body"]["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiOutputTest, ErrorLines) {
  RequestError e{"r2", 7, "invalid_max_tokens", "bad", RequestFormat::kOpenAiCompletion};
  Json j = Json::parse(FormatErrorLine(e));
  EXPECT_EQ(j["custom_id"], "r2");
  EXPECT_EQ(j["line"], 7);
  EXPECT_EQ(j["error"], (Json{{"code", "invalid_max_tokens"}, {"message", "bad"}}));
  EXPECT_EQ(j["response"]["status_code"], 400);
  EXPECT_EQ(j["response"]["body"]["error"]["code"], "invalid_max_tokens");
  e.custom_id.clear();
  j = Json::parse(FormatErrorLine(e));
  EXPECT_TRUE(j["custom_id"].is_null());
  EXPECT_TRUE(j["response"].is_null());
  EXPECT_EQ(j["error"]["code"], "invalid_max_tokens");
}

}  // namespace
}  // namespace strata
