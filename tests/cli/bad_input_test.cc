// Bad input through the binary: the request-parsing corpus (tests/data/job/bad_lines.jsonl, with
// its expected codes in bad_lines.expected.tsv) followed by OpenAI lines with bad bodies, an
// unknown url, a chat request the model has no template for, a prompt beyond the context, a
// duplicate id and a 20 MB line; then an empty file, blank lines, and a truncated .zst. Every
// good line completes, every bad line (a blank one too) gets an error line whose code and
// message name the problem, and nothing crashes.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

using Json = nlohmann::json;

const std::string kModel = kFixtureModel + "llama-gqa";
const std::string kCorpus = std::string(STRATA_SOURCE_DIR) + "/tests/data/job/bad_lines";

struct Expect {
  std::string code;  // "ok" for a line that completes
  std::string custom_id;
  std::string piece;  // the error message contains it
};

// Line number -> expectation, from the corpus's .tsv.
std::map<uint64_t, Expect> CorpusExpectations() {
  std::map<uint64_t, Expect> out;
  std::ifstream f(kCorpus + ".expected.tsv");
  for (std::string row; std::getline(f, row);) {
    if (row.empty() || row[0] == '#') continue;
    std::istringstream fields(row);
    std::string number;
    Expect e;
    std::getline(fields, number, '\t');
    std::getline(fields, e.code, '\t');
    std::getline(fields, e.custom_id, '\t');
    std::getline(fields, e.piece, '\t');
    out[std::stoull(number)] = e;
  }
  return out;
}

std::string OpenAi(const std::string& id, const std::string& url, const Json& body) {
  return Json{{"custom_id", id}, {"method", "POST"}, {"url", url}, {"body", body}}.dump();
}

TEST_F(CliTest, EveryBadLineGetsAnErrorLineAndEveryGoodLineCompletes) {
  std::map<uint64_t, Expect> expected = CorpusExpectations();
  ASSERT_GE(expected.size(), 40u);
  std::string input = ReadFile(kCorpus + ".jsonl");
  ASSERT_NE(input.back(), '\n');  // the corpus's last line has no newline; end it here
  uint64_t line = std::count(input.begin(), input.end(), '\n') + 1;
  input += "\n";
  const auto add = [&](const std::string& text, Expect e) {
    input += text + "\n";
    expected[++line] = std::move(e);
  };
  const Json user = Json::array({{{"role", "user"}, {"content", "hi"}}});
  add(OpenAi("oa-good", "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 4}}),
      {"ok", "oa-good", ""});
  add(OpenAi("oa-url", "/v1/embeddings", {{"input", "x"}}),
      {"unsupported_url", "oa-url", "/v1/embeddings"});
  add(R"({"custom_id":"oa-body","method":"POST","url":"/v1/completions","body":[1]})",
      {"invalid_body", "oa-body", "\"body\" must be an object"});
  add(OpenAi("oa-noprompt", "/v1/completions", {{"max_tokens", 4}}),
      {"missing_prompt", "oa-noprompt", "prompt"});
  add(OpenAi("oa-n", "/v1/completions", {{"prompt", "x"}, {"n", 3}}),
      {"unsupported_field", "oa-n", "\"n\""});
  add(OpenAi("oa-mt", "/v1/completions", {{"prompt", "x"}, {"max_tokens", "ten"}}),
      {"invalid_max_tokens", "oa-mt", "got a string"});
  add(OpenAi("oa-msgs", "/v1/chat/completions", {{"messages", "hi"}}),
      {"invalid_messages", "oa-msgs", "messages"});
  add(OpenAi("oa-chat", "/v1/chat/completions", {{"messages", user}}),
      {"unsupported_chat_template", "oa-chat", "chat template"});
  add(Json{{"custom_id", "too-long-prompt"}, {"prompt", std::string(2000, 'z')}}.dump(),
      {"context_length_exceeded", "too-long-prompt", "context"});
  add(R"({"custom_id":"good-all","prompt":"duplicate"})",
      {"duplicate_custom_id", "good-all", "already used"});
  add(R"({"custom_id":"huge","prompt":")" + std::string(20 << 20, 'h') + "\"}",
      {"line_too_long", "", "16777216 bytes"});
  add(OpenAi("oa-good-2", "/v1/completions", {{"prompt", "Bye"}, {"max_tokens", 2}}),
      {"ok", "oa-good-2", ""});
  Write("in.jsonl", input);

  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl") + " --batch-size 4");
  ASSERT_EQ(r.exit_code, 1) << r.stderr_text;
  std::map<std::string, uint64_t> ok_lines;
  for (const auto& [n, e] : expected) {
    if (e.code == "ok") ok_lines[e.custom_id] = n;
  }
  std::map<uint64_t, int> answered;
  for (const Json& j : ReadJsonLines(Path("out.jsonl"))) {
    if (j.contains("error") && !j["error"].is_null()) {
      const uint64_t n = j["line"].get<uint64_t>();
      ++answered[n];
      ASSERT_TRUE(expected.count(n)) << j.dump();
      const Expect& e = expected[n];
      EXPECT_EQ(j["error"]["code"], e.code) << "line " << n << ": " << j.dump();
      const std::string message = j["error"]["message"];
      EXPECT_NE(message.find(e.piece), std::string::npos) << "line " << n << ": " << message;
      if (!e.custom_id.empty()) {
        EXPECT_EQ(j["custom_id"], e.custom_id) << "line " << n;
      }
    } else {
      const std::string id = j["custom_id"];
      ASSERT_TRUE(ok_lines.count(id)) << j.dump();
      ++answered[ok_lines[id]];
    }
  }
  for (const auto& [n, e] : expected) {
    EXPECT_EQ(answered[n], 1) << "line " << n << " (" << e.code << ") answered " << answered[n]
                              << " times";
  }
  EXPECT_EQ(answered.size(), expected.size());
}

TEST_F(CliTest, AnEmptyInputFinishesWithAnEmptyOutput) {
  Write("in.jsonl", "");
  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(std::filesystem::exists(Path("out.jsonl")));
  EXPECT_EQ(ReadFile(Path("out.jsonl")), "");
}

// Each input line gets a result line, a blank one too; the rerun finds it done.
TEST_F(CliTest, BlankLinesGetErrorLinesThatTheRerunKeeps) {
  Write("in.jsonl", "\xEF\xBB\xBF\n" + Json{{"custom_id", "a"}, {"prompt", "Hi"},
                                             {"max_tokens", 2}}.dump() + "\n  \r\n\n");
  CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                          " --output " + Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  std::map<uint64_t, std::string> blank;
  int completions = 0;
  for (const Json& j : ReadJsonLines(Path("out.jsonl"))) {
    if (!j.contains("error")) {
      ++completions;
      continue;
    }
    EXPECT_TRUE(j["custom_id"].is_null()) << j.dump();
    blank[j["line"].get<uint64_t>()] = j["error"]["code"];
  }
  EXPECT_EQ(completions, 1);
  EXPECT_EQ(blank, (std::map<uint64_t, std::string>{
                       {1, "empty_line"}, {3, "empty_line"}, {4, "empty_line"}}));
  const std::string first = ReadFile(Path("out.jsonl"));
  r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
                Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("4 already done"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(ReadFile(Path("out.jsonl")), first);
}

// A .zst cut short: the lines of its complete frames run, then the job stops with exit 2 naming
// the file; a rerun on the repaired file resumes.
TEST_F(CliTest, TruncatedZstdInputRunsWhatItCanThenFails) {
  std::string first, second;
  for (int i = 0; i < 6; ++i) {
    (i < 3 ? first : second) += R"({"custom_id":"z)" + std::to_string(i) +
                                R"(","prompt":"Hello there","max_tokens":3,"temperature":0})" "\n";
  }
  Write("a.jsonl", first);
  Write("b.jsonl", second);
  const std::string zstd = "zstd -q -f ";
  ASSERT_EQ(std::system((zstd + Path("a.jsonl") + " -o " + Path("a.zst")).c_str()), 0);
  ASSERT_EQ(std::system((zstd + Path("b.jsonl") + " -o " + Path("b.zst")).c_str()), 0);
  const std::string b = ReadFile(Path("b.zst"));
  Write("in.jsonl.zst", ReadFile(Path("a.zst")) + b.substr(0, b.size() / 2));
  CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl.zst") +
                          " --output " + Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("in.jsonl.zst"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 3u);

  Write("in.jsonl.zst", ReadFile(Path("a.zst")) + b);
  r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl.zst") + " --output " +
                Path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 6u);
}

}  // namespace
}  // namespace strata
