// Batch operations through the binary: OpenAI batch lines, zstd files, shards and merge,
// metrics, progress lines, and stopping on signals.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

using Json = nlohmann::json;

const std::string kModel = kFixtureModel + "llama-gqa";

// `n` greedy requests of varied prompt lengths and max_tokens.
std::string Requests(int n, int max_tokens = 8) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += Json{{"custom_id", std::string("q") + std::to_string(i)},
                {"prompt", std::string(1 + (i * 7) % 23, 'a' + i % 26) + " once"},
                {"max_tokens", 2 + (i * 5) % max_tokens},
                {"temperature", 0}}
               .dump() +
           "\n";
  }
  return out;
}

std::string RunArgs(const std::string& in, const std::string& out, const std::string& extra = "") {
  return "run --model " + kModel + " --input " + in + " --output " + out + " " + extra;
}

TEST_F(CliTest, OpenAiLinesGetOpenAiResults) {
  Write("in.jsonl",
        R"({"custom_id":"c1","method":"POST","url":"/v1/completions","body":{"model":"m",)"
        R"("prompt":"Hello","max_tokens":3,"temperature":0}})" "\n"
        R"({"custom_id":"chat","method":"POST","url":"/v1/chat/completions","body":{)"
        R"("messages":[{"role":"user","content":"Hi"}]}})" "\n"
        R"({"custom_id":"e1","method":"POST","url":"/v1/embeddings","body":{"input":"x"}})" "\n"
        R"({"custom_id":"p1","prompt":"Hello","max_tokens":3,"temperature":0})" "\n");
  const CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("out.jsonl")));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  std::map<std::string, Json> by_id;
  for (const Json& j : ReadJsonLines(Path("out.jsonl"))) by_id[j["custom_id"]] = j;
  ASSERT_EQ(by_id.size(), 4u);
  const Json& c1 = by_id["c1"];
  EXPECT_EQ(c1["response"]["status_code"], 200);
  EXPECT_EQ(c1["response"]["body"]["model"], "llama-gqa");
  EXPECT_EQ(c1["response"]["body"]["usage"]["completion_tokens"], 3);
  EXPECT_TRUE(c1["error"].is_null());
  // The fixture model has no chat template: a clear per-request error, not a failed job.
  EXPECT_EQ(by_id["chat"]["error"]["code"], "unsupported_chat_template");
  EXPECT_EQ(by_id["chat"]["response"]["status_code"], 400);
  EXPECT_EQ(by_id["e1"]["error"]["code"], "unsupported_url");
  // Plain lines keep the plain format, with the same text as the OpenAI twin.
  EXPECT_EQ(by_id["p1"]["text"], c1["response"]["body"]["choices"][0]["text"]);
}

TEST_F(CliTest, CompressedInputAndOutput) {
  Write("in.jsonl", Requests(12));
  ASSERT_EQ(std::system(("zstd -q -f " + Path("in.jsonl") + " -o " + Path("in.jsonl.zst")).c_str()),
            0);
  CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("plain.jsonl"), "--batch-size 4"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  r = RunStrata(RunArgs(Path("in.jsonl.zst"), Path("out.jsonl.zst"), "--batch-size 4"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ASSERT_EQ(std::system(("zstd -q -d -f " + Path("out.jsonl.zst") + " -o " + Path("out.jsonl"))
                            .c_str()),
            0);
  EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("plain.jsonl")));
}

TEST_F(CliTest, ShardsMergeIntoTheUnshardedOutputInInputOrder) {
  Write("in.jsonl", Requests(20) + "not json\n" + Requests(1));  // a bad line and a duplicate
  CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("whole.jsonl"), "--batch-size 3"));
  ASSERT_EQ(r.exit_code, 1) << r.stderr_text;
  std::string shard_files;
  for (int i = 0; i < 3; ++i) {
    const std::string out = Path("shard" + std::to_string(i) + ".jsonl");
    r = RunStrata(RunArgs(Path("in.jsonl"), out, "--batch-size 3 --shard " + std::to_string(i) + "/3"));
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.stderr_text;
    shard_files += " " + out;
  }
  r = RunStrata("merge --input-order " + Path("in.jsonl") + shard_files + " --output " +
                Path("merged.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  r = RunStrata("merge --input-order " + Path("in.jsonl") + " " + Path("whole.jsonl") +
                " --output " + Path("whole-ordered.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(ReadFile(Path("merged.jsonl")), ReadFile(Path("whole-ordered.jsonl")));
  const auto lines = ReadJsonLines(Path("merged.jsonl"));
  ASSERT_EQ(lines.size(), 22u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(lines[i]["custom_id"], std::string("q") + std::to_string(i));
  EXPECT_EQ(lines[20]["error"]["code"], "invalid_json");
  EXPECT_EQ(lines[21]["error"]["code"], "duplicate_custom_id");

  // A missing shard is named, and nothing is written.
  r = RunStrata("merge --input-order " + Path("in.jsonl") + " " + Path("shard0.jsonl") +
                " --output " + Path("partial.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("has no result"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(Path("partial.jsonl")));
}

TEST_F(CliTest, MetricsAndProgressLines) {
  Write("in.jsonl", Requests(16) + "[1]\n");
  const CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("out.jsonl"),
                                    "--batch-size 4 --sort-window 32 --progress-interval 0.01 "
                                    "--metrics " + Path("m.json")));
  ASSERT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("progress 17/17 requests (100.0%), 1 failed"), std::string::npos)
      << r.stderr_text;
  const Json m = Json::parse(ReadFile(Path("m.json")));
  EXPECT_EQ(m["exit_code"], 1);
  EXPECT_EQ(m["requests"]["completed"], 16);
  EXPECT_EQ(m["requests"]["failed"], 1);
  EXPECT_EQ(m["requests"]["by_error_code"]["not_an_object"], 1);
  EXPECT_EQ(m["blocks"]["count"], 4);
  EXPECT_GT(m["tokens"]["generated"].get<int>(), 16);
  EXPECT_GT(m["throughput"]["generated_tokens_per_s"].get<double>(), 0);
  EXPECT_GE(m["padding"]["prompt_waste"].get<double>(), 0);
  EXPECT_LT(m["padding"]["prompt_waste"].get<double>(), 0.5);
  // Everything on the device (no profile, no plan): the engine's figures say so.
  EXPECT_GT(m["memory"]["peak_bytes"]["gpu"].get<uint64_t>(), 0u);
  EXPECT_EQ(m["memory"]["peak_bytes"]["disk"].get<uint64_t>(), 0u);
  EXPECT_EQ(m["links"]["bytes"]["disk_to_cpu"].get<uint64_t>(), 0u);
  EXPECT_EQ(m["links"]["bytes"]["cpu_to_gpu"].get<uint64_t>(), 0u);
  EXPECT_GT(m["memory"]["peak_rss_bytes"].get<uint64_t>(), 0u);
}

// A resumed job's progress counts the lines the earlier run wrote, never "0/~0".
TEST_F(CliTest, ResumedProgressCountsWhatIsAlreadyDone) {
  Write("first.jsonl", Requests(8));
  ASSERT_EQ(RunStrata(RunArgs(Path("first.jsonl"), Path("out.jsonl"))).exit_code, 0);
  Write("in.jsonl", Requests(16));
  const CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("out.jsonl"),
                                        "--batch-size 4 --progress-interval 0.01"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("progress 16/16 requests (100.0%, 8 already done), 0 failed"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("/~0 requests"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("progress 0/"), std::string::npos) << r.stderr_text;
}

// SIGTERM stops the job at a token step with every written line whole; a rerun finishes it
// with the same lines as a run that was never stopped.
TEST_F(CliTest, SigtermStopsCleanlyAndTheRerunResumes) {
  Write("in.jsonl", Requests(80, 24));
  ASSERT_EQ(RunStrata(RunArgs(Path("in.jsonl"), Path("ref.jsonl"), "--batch-size 1")).exit_code, 0);
  const pid_t pid = StartStrata({"run", "--model", kModel, "--input", Path("in.jsonl"),
                                 "--output", Path("out.jsonl"), "--batch-size", "1", "--metrics",
                                 Path("m.json")},
                                Path("err.txt"));
  ASSERT_TRUE(WaitForOutput(Path("out.jsonl"), pid)) << ReadFile(Path("err.txt"));
  ::kill(pid, SIGTERM);
  ASSERT_EQ(WaitStrata(pid), 75) << ReadFile(Path("err.txt"));
  EXPECT_NE(ReadFile(Path("err.txt")).find("rerun the same command to resume"),
            std::string::npos);
  const Json m = Json::parse(ReadFile(Path("m.json")));
  EXPECT_TRUE(m["interrupted"].get<bool>());
  EXPECT_EQ(m["interrupt_signal"], "SIGTERM");
  EXPECT_GT(m["requests"]["not_run"].get<int>(), 0);
  const std::string partial = ReadFile(Path("out.jsonl"));
  ASSERT_FALSE(partial.empty());
  EXPECT_EQ(partial.back(), '\n');
  EXPECT_LT(ReadJsonLines(Path("out.jsonl")).size(), 80u);  // each line parses

  const CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("out.jsonl"), "--batch-size 1"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(SortedLines(ReadFile(Path("out.jsonl"))), SortedLines(ReadFile(Path("ref.jsonl"))));
}

// A second signal exits at once. The job is stopped while both signals are sent, so both are
// pending together and arrive back to back.
TEST_F(CliTest, SecondSignalExitsAtOnce) {
  Write("in.jsonl", Requests(80, 24));
  const pid_t pid = StartStrata({"run", "--model", kModel, "--input", Path("in.jsonl"),
                                 "--output", Path("out.jsonl"), "--batch-size", "1"},
                                Path("err.txt"));
  ASSERT_TRUE(WaitForOutput(Path("out.jsonl"), pid)) << ReadFile(Path("err.txt"));
  ::kill(pid, SIGSTOP);
  ::kill(pid, SIGUSR1);
  ::kill(pid, SIGINT);
  ::kill(pid, SIGCONT);
  EXPECT_EQ(WaitStrata(pid), 75);
  EXPECT_NE(ReadFile(Path("err.txt")).find("second signal"), std::string::npos)
      << ReadFile(Path("err.txt"));
  // Whatever was cut mid-write, the rerun repairs and finishes.
  const CliResult r = RunStrata(RunArgs(Path("in.jsonl"), Path("out.jsonl"), "--batch-size 1"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(ReadJsonLines(Path("out.jsonl")).size(), 80u);
}

// The default model renders chat requests with its ChatML template (and its default system
// prompt), exactly as a completions request holding the rendered prompt.
TEST_F(CliTest, DefaultModelRendersChatWithItsTemplate) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not in the cache";
  const std::string rendered =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
      "<|im_start|>assistant\n";
  Write("in.jsonl",
        Json{{"custom_id", "chat"}, {"method", "POST"}, {"url", "/v1/chat/completions"},
             {"body", {{"messages", {{{"role", "user"},
                                      {"content", "What is the capital of France?"}}}},
                       {"max_tokens", 8}, {"temperature", 0}}}}
                .dump() +
            "\n" +
            Json{{"custom_id", "raw"}, {"method", "POST"}, {"url", "/v1/completions"},
                 {"body", {{"prompt", rendered}, {"max_tokens", 8}, {"temperature", 0}}}}
                .dump() +
            "\n");
  const CliResult r = RunStrata("run --input " + Path("in.jsonl") + " --output " +
                                Path("out.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("chat template ChatML"), std::string::npos) << r.stderr_text;
  std::map<std::string, Json> by_id;
  for (const Json& j : ReadJsonLines(Path("out.jsonl"))) by_id[j["custom_id"]] = j;
  const Json& chat = by_id["chat"]["response"]["body"];
  const Json& raw = by_id["raw"]["response"]["body"];
  EXPECT_EQ(chat["usage"], raw["usage"]);
  EXPECT_EQ(chat["choices"][0]["message"]["content"], raw["choices"][0]["text"]);
  EXPECT_NE(chat["choices"][0]["message"]["content"].get<std::string>().find("Paris"),
            std::string::npos)
      << chat.dump();
}

// Raw prompts that an instruct model answers with end-of-text at once get a warning that says to
// send chat lines; the same questions as chat lines get none.
TEST_F(CliTest, DefaultModelSaysToSendChatLinesWhenRawPromptsStopAtOnce) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not in the cache";
  const std::vector<std::string> questions = {"What is 2 + 2?", "How are you?",
                                              "What is the capital of France?",
                                              "Why is the sky blue?"};
  std::string raw, chat;
  for (size_t i = 0; i < questions.size(); ++i) {
    const std::string id = "q" + std::to_string(i);
    raw += Json{{"custom_id", id}, {"prompt", questions[i]}, {"max_tokens", 8},
                {"temperature", 0}}.dump() + "\n";
    chat += Json{{"custom_id", id}, {"method", "POST"}, {"url", "/v1/chat/completions"},
                 {"body", {{"messages", {{{"role", "user"}, {"content", questions[i]}}}},
                           {"max_tokens", 8}, {"temperature", 0}}}}.dump() + "\n";
  }
  Write("raw.jsonl", raw);
  Write("chat.jsonl", chat);
  const std::string hint = "raw-prompt requests (\"prompt\" text, not chat \"messages\") stopped";
  CliResult r = RunStrata("run --input " + Path("raw.jsonl") + " --output " + Path("raw.out"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(hint), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("/v1/chat/completions"), std::string::npos) << r.stderr_text;
  r = RunStrata("run --input " + Path("chat.jsonl") + " --output " + Path("chat.out"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find(hint), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace strata
