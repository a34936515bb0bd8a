// Tokenizer::FromJsonFile on small hand-made tokenizer.json files: what is accepted, and the
// Status for malformed or unsupported ones.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "src/tokenizer/byte_level.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace strata {
namespace {

using nlohmann::json;

// Byte tokens 0-255, "ab" (256, from the merge "a b") and the special "<|end|>" (257).
json MinimalTokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  json added = json::array();
  added.push_back({{"id", 257}, {"content", "<|end|>"}, {"special", true}});
  json tokenizer = json::object();
  tokenizer["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})}};
  tokenizer["added_tokens"] = added;
  tokenizer["normalizer"] = nullptr;
  tokenizer["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  tokenizer["post_processor"] = nullptr;
  tokenizer["decoder"] = {{"type", "ByteLevel"}};
  return tokenizer;
}

Result<std::unique_ptr<Tokenizer>> LoadText(const std::string& text,
                                            const std::string& config = "") {
  const auto dir = testing_util::ScratchDir();
  testing_util::WriteFile(dir / "tokenizer.json", text);
  if (!config.empty()) testing_util::WriteFile(dir / "tokenizer_config.json", config);
  return Tokenizer::FromJsonFile((dir / "tokenizer.json").string());
}

Result<std::unique_ptr<Tokenizer>> LoadEdited(const std::function<void(json&)>& edit) {
  json tokenizer = MinimalTokenizer();
  edit(tokenizer);
  return LoadText(tokenizer.dump());
}

void ExpectError(const Result<std::unique_ptr<Tokenizer>>& result, StatusCode code,
                 const std::string& fragment) {
  ASSERT_FALSE(result.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  EXPECT_NE(result.status().message().find(fragment), std::string::npos)
      << result.status().ToString();
  EXPECT_NE(result.status().message().find("tokenizer.json"), std::string::npos)
      << "the message should name the file: " << result.status().ToString();
}

TEST(TokenizerJsonTest, MinimalTokenizerLoads) {
  Result<std::unique_ptr<Tokenizer>> t = LoadEdited([](json&) {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Encode("ab<|end|>c", false), (std::vector<int32_t>{256, 257, 'c'}));
  EXPECT_EQ((*t)->vocab_size(), 258);
  EXPECT_EQ((*t)->bos_id(), -1);
  EXPECT_FALSE((*t)->add_bos_by_default());
  EXPECT_EQ((*t)->Encode("a", /*add_bos=*/true), (std::vector<int32_t>{'a'}));
}

TEST(TokenizerJsonTest, AcceptedVariants) {
  // Merges as pairs, an NFC normalizer, a Sequence decoder.
  Result<std::unique_ptr<Tokenizer>> t = LoadEdited([](json& j) {
    j["model"]["merges"] = json::array({json::array({"a", "b"})});
    j["normalizer"] = {{"type", "NFC"}};
    j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteLevel"}}})}};
  });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Encode("ab", false), (std::vector<int32_t>{256}));
}

TEST(TokenizerJsonTest, TemplateProcessingGivesBos) {
  const char* kTemplate = R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "trim_offsets": false},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [257], "tokens": ["<|end|>"]}}}]})";
  Result<std::unique_ptr<Tokenizer>> t =
      LoadEdited([&](json& j) { j["post_processor"] = json::parse(kTemplate, nullptr, false); });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE((*t)->add_bos_by_default());
  EXPECT_EQ((*t)->bos_id(), 257);
  EXPECT_EQ((*t)->Encode("c", true), (std::vector<int32_t>{257, 'c'}));
}

TEST(TokenizerJsonTest, ConfigNamesBosAndEos) {
  json tokenizer = MinimalTokenizer();
  Result<std::unique_ptr<Tokenizer>> t =
      LoadText(tokenizer.dump(), R"({"add_bos_token": true, "bos_token": {"content": "<|end|>"},
                            "eos_token": "<|end|>"})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->bos_id(), 257);
  EXPECT_EQ((*t)->eos_id(), 257);
  // As transformers 5: tokenizer.json's post_processor, not add_bos_token, decides.
  EXPECT_FALSE((*t)->add_bos_by_default());

  ExpectError(LoadText(tokenizer.dump(), "{not json"), StatusCode::kCorrupt,
              "tokenizer_config.json");
  ExpectError(LoadText(tokenizer.dump(), R"({"bos_token": 5})"), StatusCode::kCorrupt, "bos_token");
}

TEST(TokenizerJsonTest, MalformedFiles) {
  ExpectError(LoadText("{\"model\": "), StatusCode::kCorrupt, "not valid JSON");
  ExpectError(LoadText("[]"), StatusCode::kCorrupt, "JSON object");
  ExpectError(LoadEdited([](json& j) { j.erase("model"); }), StatusCode::kCorrupt, "model");
  ExpectError(LoadEdited([](json& j) { j["model"]["vocab"] = json::array(); }),
              StatusCode::kCorrupt, "model.vocab");
  ExpectError(LoadEdited([](json& j) { j["model"]["vocab"]["a"] = "x"; }), StatusCode::kCorrupt,
              "model.vocab[\"a\"]");
  ExpectError(LoadEdited([](json& j) { j["model"]["vocab"]["a"] = -5; }), StatusCode::kCorrupt,
              "non-negative id");
  ExpectError(LoadEdited([](json& j) { j["model"].erase("merges"); }), StatusCode::kCorrupt,
              "merges");
  ExpectError(LoadEdited([](json& j) { j["model"]["merges"] = "a b"; }), StatusCode::kCorrupt,
              "model.merges");
  ExpectError(LoadEdited([](json& j) { j["model"]["merges"] = json::array({"ab"}); }),
              StatusCode::kCorrupt, "model.merges[0]");
  ExpectError(LoadEdited([](json& j) { j["model"]["merges"] = json::array({json::array({"a"})}); }),
              StatusCode::kCorrupt, "model.merges[0]");
  ExpectError(LoadEdited([](json& j) { j["model"]["merges"] = json::array({"a zz"}); }),
              StatusCode::kCorrupt, "not in the vocabulary");
  ExpectError(LoadEdited([](json& j) { j["model"]["ignore_merges"] = "yes"; }),
              StatusCode::kCorrupt, "model.ignore_merges");
  ExpectError(LoadEdited([](json& j) { j["added_tokens"][0].erase("id"); }), StatusCode::kCorrupt,
              "added_tokens[0]");
  ExpectError(LoadEdited([](json& j) { j["added_tokens"][0]["content"] = 5; }),
              StatusCode::kCorrupt, "added_tokens[0].content");
  ExpectError(LoadEdited([](json& j) { j["added_tokens"][0]["special"] = "yes"; }),
              StatusCode::kCorrupt, "added_tokens[0].special");
  ExpectError(LoadEdited([](json& j) {
                j["pre_tokenizer"] = {
                    {"type", "Split"}, {"pattern", {{"Foo", "x"}}}, {"behavior", "Isolated"}};
              }),
              StatusCode::kCorrupt, "pre_tokenizer.pattern");
  ExpectError(LoadEdited([](json& j) {
                j["pre_tokenizer"] = {
                    {"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}};
              }),
              StatusCode::kCorrupt, "Sideways");
  ExpectError(LoadEdited([](json& j) { j["pre_tokenizer"] = 7; }), StatusCode::kCorrupt,
              "pre_tokenizer");
  ExpectError(LoadEdited([](json& j) {
                j["post_processor"] = {
                    {"type", "TemplateProcessing"},
                    {"single", json::parse(R"([{"SpecialToken": {"id": "<s>"}}])", nullptr, false)},
                    {"special_tokens", json::object()}};
              }),
              StatusCode::kCorrupt, "<s>");
}

TEST(TokenizerJsonTest, BadRegexIsInvalidArgument) {
  ExpectError(
      LoadEdited([](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers", json::array({{{"type", "Split"},
                                            {"pattern", {{"Regex", "(?<unclosed"}}},
                                            {"behavior", "Isolated"}},
                                           {{"type", "ByteLevel"}, {"use_regex", false}}})}};
      }),
      StatusCode::kInvalidArgument, "invalid regex");
}

TEST(TokenizerJsonTest, UnsupportedFeatures) {
  ExpectError(LoadEdited([](json& j) { j["model"]["type"] = "WordPiece"; }),
              StatusCode::kUnsupported, "WordPiece");
  ExpectError(LoadEdited([](json& j) { j["model"]["dropout"] = 0.1; }), StatusCode::kUnsupported,
              "dropout");
  ExpectError(LoadEdited([](json& j) {
                j["normalizer"] = {{"type", "Lowercase"}};
              }),
              StatusCode::kUnsupported, "Lowercase");
  ExpectError(LoadEdited([](json& j) {
                j["pre_tokenizer"] = {{"type", "Metaspace"}};
              }),
              StatusCode::kUnsupported, "Metaspace");
  ExpectError(LoadEdited([](json& j) {
                j["pre_tokenizer"] = {{"type", "Sequence"},
                                      {"pretokenizers", json::array({{{"type", "Whitespace"}}})}};
              }),
              StatusCode::kUnsupported, "pretokenizers[0]");
  ExpectError(LoadEdited([](json& j) { j["pre_tokenizer"] = nullptr; }), StatusCode::kUnsupported,
              "ByteLevel");
  ExpectError(LoadEdited([](json& j) { j["decoder"] = nullptr; }), StatusCode::kUnsupported,
              "decoder");
  ExpectError(LoadEdited([](json& j) {
                j["decoder"] = {{"type", "WordPiece"}};
              }),
              StatusCode::kUnsupported, "decoder");
  ExpectError(LoadEdited([](json& j) {
                j["post_processor"] = {{"type", "RobertaProcessing"}};
              }),
              StatusCode::kUnsupported, "RobertaProcessing");
}

TEST(TokenizerJsonTest, MissingFileIsNotFound) {
  Result<std::unique_ptr<Tokenizer>> t = Tokenizer::FromJsonFile("/nonexistent/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata
