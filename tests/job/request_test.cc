#include "src/job/request.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "src/job/jsonl_reader.h"

namespace strata {
namespace {

using Json = nlohmann::json;

const std::string kCorpus = std::string(STRATA_SOURCE_DIR) + "/tests/data/job/bad_lines.jsonl";
const std::string kExpected =
    std::string(STRATA_SOURCE_DIR) + "/tests/data/job/bad_lines.expected.tsv";

struct Expectation {
  std::string code;
  std::string custom_id;
  std::string message_piece;
};

std::map<uint64_t, Expectation> LoadExpectations() {
  std::map<uint64_t, Expectation> out;
  std::ifstream f(kExpected);
  std::string row;
  while (std::getline(f, row)) {
    if (row.empty() || row[0] == '#') continue;
    std::istringstream fields(row);
    std::string number;
    Expectation e;
    std::getline(fields, number, '\t');
    std::getline(fields, e.code, '\t');
    std::getline(fields, e.custom_id, '\t');
    std::getline(fields, e.message_piece, '\t');
    out[std::stoull(number)] = e;
  }
  return out;
}

ParsedLine Parse(const std::string& line) { return ParseRequestLine(line, 7); }

TEST(RequestTest, CorpusGivesExpectedCodes) {
  const auto expected = LoadExpectations();
  ASSERT_GE(expected.size(), 40u);
  auto reader = JsonlReader::Open(kCorpus);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  JsonlLine line;
  std::map<uint64_t, bool> seen;
  while (true) {
    auto more = (*reader)->Next(&line);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    const auto it = expected.find(line.line_number);
    ASSERT_NE(it, expected.end()) << "unexpected line " << line.line_number;
    const Expectation& e = it->second;
    seen[line.line_number] = true;
    const ParsedLine parsed = ParseRequestLine(line.text, line.line_number);
    ASSERT_NE(parsed.request.has_value(), parsed.error.has_value());
    if (e.code == "ok") {
      ASSERT_TRUE(parsed.request) << "line " << line.line_number << ": "
                                  << parsed.error->code << " " << parsed.error->message;
      EXPECT_EQ(parsed.request->custom_id, e.custom_id);
      EXPECT_EQ(parsed.request->line_number, line.line_number);
      continue;
    }
    ASSERT_TRUE(parsed.error) << "line " << line.line_number << " should fail with " << e.code;
    EXPECT_EQ(parsed.error->code, e.code) << "line " << line.line_number << ": "
                                          << parsed.error->message;
    EXPECT_EQ(parsed.error->custom_id, e.custom_id) << "line " << line.line_number;
    EXPECT_EQ(parsed.error->line_number, line.line_number);
    EXPECT_NE(parsed.error->message.find(e.message_piece), std::string::npos)
        << "line " << line.line_number << ": \"" << parsed.error->message
        << "\" does not mention \"" << e.message_piece << "\"";
  }
  EXPECT_EQ(seen.size(), expected.size());
}

TEST(RequestTest, ReadsEveryField) {
  const ParsedLine p = Parse(
      R"({"custom_id":"a","prompt":"hi","max_tokens":32,"temperature":0.5,"top_p":0.9,)"
      R"("top_k":40,"seed":18446744073709551615,"stop":["x","y"],"ignore_eos":true})");
  ASSERT_TRUE(p.request) << p.error->message;
  const SamplingParams& s = p.request->sampling;
  EXPECT_EQ(p.request->prompt, "hi");
  EXPECT_EQ(p.request->line_number, 7u);
  EXPECT_EQ(s.max_tokens, 32);
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.seed, UINT64_MAX);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(s.ignore_eos);
}

TEST(RequestTest, DefaultsAndBounds) {
  const ParsedLine d = Parse(R"({"custom_id":"a","prompt":"hi"})");
  ASSERT_TRUE(d.request);
  EXPECT_EQ(d.request->sampling.max_tokens, 16);
  EXPECT_FALSE(d.request->sampling.seed.has_value());
  EXPECT_TRUE(d.request->sampling.stop.empty());
  for (const char* ok : {R"("max_tokens":1)", R"("max_tokens":1048576)", R"("temperature":0)",
                         R"("temperature":2)", R"("top_p":1)", R"("top_k":-1)", R"("seed":0)",
                         R"("stop":[])", R"("stop":"\n")", R"("top_k":2147483647)"}) {
    const ParsedLine p = Parse(std::string(R"({"custom_id":"a","prompt":"hi",)") + ok + "}");
    EXPECT_TRUE(p.request) << ok << ": " << p.error->message;
  }
  for (const char* bad : {R"("top_k":2147483648)", R"("temperature":2.0001)",
                          R"("seed":18446744073709551616)", R"("max_tokens":32.0)",
                          R"("ignore_eos":1)", R"("stop":["a",1])"}) {
    const ParsedLine p = Parse(std::string(R"({"custom_id":"a","prompt":"hi",)") + bad + "}");
    ASSERT_TRUE(p.error) << bad;
    EXPECT_EQ(p.error->custom_id, "a");
  }
}

TEST(RequestTest, LongCustomIdAtTheLimit) {
  const std::string id(kMaxCustomIdBytes, 'x');
  EXPECT_TRUE(Parse(R"({"custom_id":")" + id + R"(","prompt":"p"})").request);
  EXPECT_EQ(Parse(R"({"custom_id":")" + id + R"(x","prompt":"p"})").error->code,
            "invalid_custom_id");
}

TEST(RequestTest, DeepNestingIsHandled) {
  EXPECT_EQ(Parse(std::string(1 << 20, '[')).error->code, "invalid_json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const ParsedLine p = Parse(R"({"custom_id":"a","prompt":"p","extra":)" + deep + "}");
  EXPECT_TRUE(p.request);
}

// Random bytes and mutations of a good line never throw and always give exactly one result.
TEST(RequestTest, ArbitraryBytesNeverThrow) {
  std::mt19937 rng(1234);
  const std::string good =
      R"({"custom_id":"abc","prompt":"héllo","max_tokens":5,"stop":["a"],"seed":3})";
  for (int i = 0; i < 20000; ++i) {
    std::string line = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      line[rng() % line.size()] = static_cast<char>(rng() % 256);
    }
    const ParsedLine p = ParseRequestLine(line, 1);
    ASSERT_NE(p.request.has_value(), p.error.has_value()) << line;
    if (p.error) {
      EXPECT_FALSE(p.error->code.empty());
      EXPECT_TRUE(Json::accept(FormatErrorLine(*p.error)));
    }
  }
}

TEST(RequestTest, FormatsCompletionLine) {
  Completion c{"req-1", "Hello \"world\"\n", 5, 3, FinishReason::kStop};
  EXPECT_EQ(FormatCompletionLine(c),
            R"({"custom_id":"req-1","text":"Hello \"world\"\n","prompt_tokens":5,)"
            R"("completion_tokens":3,"finish_reason":"stop"})");
  c.finish_reason = FinishReason::kLength;
  EXPECT_NE(FormatCompletionLine(c).find(R"("finish_reason":"length")"), std::string::npos);
}

TEST(RequestTest, InvalidUtf8TextStillGivesValidJson) {
  const Completion c{"req-1", std::string("ab\xff\xc3", 4) + std::string(1, '\0'), 1, 1,
                     FinishReason::kLength};
  const std::string line = FormatCompletionLine(c);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const Json j = Json::parse(line, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << line;
  EXPECT_EQ(j["text"].get<std::string>(), std::string("ab\xEF\xBF\xBD\xEF\xBF\xBD", 8) +
                                               std::string(1, '\0'));

  const RequestError e{"", 3, "invalid_utf8", "bad byte \xff here"};
  const Json err = Json::parse(FormatErrorLine(e), nullptr, false);
  ASSERT_FALSE(err.is_discarded());
  EXPECT_TRUE(err["custom_id"].is_null());
  EXPECT_EQ(err["line"].get<uint64_t>(), 3u);
  EXPECT_EQ(err["error"]["code"].get<std::string>(), "invalid_utf8");
}

TEST(RequestTest, FormatsErrorLine) {
  const RequestError e{"req-9", 12, "invalid_field", "\"top_p\" must be a number"};
  EXPECT_EQ(FormatErrorLine(e),
            R"({"custom_id":"req-9","line":12,"error":{"code":"invalid_field",)"
            R"("message":"\"top_p\" must be a number"}})");
  const RequestError too_long = LineTooLongError(4, 100);
  EXPECT_EQ(too_long.code, "line_too_long");
  EXPECT_EQ(too_long.line_number, 4u);
  EXPECT_NE(too_long.message.find("100 bytes"), std::string::npos);
}

}  // namespace
}  // namespace strata
