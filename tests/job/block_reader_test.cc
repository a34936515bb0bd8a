#include "src/job/block_reader.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/job/temp_files.h"

namespace strata {
namespace {

// One token per byte, BOS = 256: enough to make prompt lengths predictable.
class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(256);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string TokenBytes(int32_t id) const override { return std::string(1, char(id)); }
  std::string Decode(const std::vector<int32_t>& ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s += TokenBytes(id);
    return s;
  }
  int vocab_size() const override { return 257; }
  int bos_id() const override { return 256; }
  int eos_id() const override { return -1; }
  bool add_bos_by_default() const override { return true; }
  bool IsSpecial(int32_t id) const override { return id == 256; }
  int32_t SpecialTokenId(std::string_view) const override { return -1; }
};

std::string Line(const std::string& id, const std::string& prompt, int max_tokens = 4) {
  return R"({"custom_id":")" + id + R"(","prompt":")" + prompt +
         R"(","max_tokens":)" + std::to_string(max_tokens) + "}\n";
}

class BlockReaderTest : public TempDirTest {
 protected:
  std::vector<Block> ReadAll(const std::string& input, OutputJournal journal = {},
                             int block_size = 2, int context = 32) {
    BlockReaderOptions o;
    o.block_size = block_size;
    o.context_length = context;
    return ReadAll(input, o, std::move(journal));
  }
  std::vector<Block> ReadAll(const std::string& input, BlockReaderOptions o,
                             OutputJournal journal = {}) {
    WriteBytes(Path("in.jsonl"), input);
    auto reader = BlockReader::Open(Path("in.jsonl"), tokenizer_, o, std::move(journal));
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    std::vector<Block> blocks;
    Block b;
    while (true) {
      Result<bool> more = (*reader)->Next(&b);
      EXPECT_TRUE(more.ok()) << more.status().ToString();
      if (!more.ok() || !*more) break;
      blocks.push_back(b);
    }
    stats_ = (*reader)->stats();
    return blocks;
  }

  ByteTokenizer tokenizer_;
  BlockReaderStats stats_;
};

const RequestError& ErrorAt(const Block& b, size_t i) { return std::get<RequestError>(b.entries[i]); }
const TokenizedRequest& RequestAt(const Block& b, size_t i) {
  return std::get<TokenizedRequest>(b.entries[i]);
}

TEST_F(BlockReaderTest, GroupsRunnableRequestsAndKeepsErrorsInOrder) {
  const auto blocks = ReadAll(Line("a", "hi") + "not json\n" + Line("b", "yo") + Line("c", "x"));
  ASSERT_EQ(blocks.size(), 2u);
  ASSERT_EQ(blocks[0].entries.size(), 3u);
  EXPECT_EQ(RequestAt(blocks[0], 0).request.custom_id, "a");
  EXPECT_EQ(RequestAt(blocks[0], 0).prompt_ids, (std::vector<int32_t>{256, 'h', 'i'}));
  EXPECT_EQ(ErrorAt(blocks[0], 1).code, "invalid_json");
  EXPECT_EQ(ErrorAt(blocks[0], 1).line_number, 2u);
  EXPECT_EQ(RequestAt(blocks[0], 2).request.custom_id, "b");
  EXPECT_EQ(blocks[0].runnable(), 2);
  EXPECT_EQ(RequestAt(blocks[1], 0).request.custom_id, "c");
  EXPECT_EQ(stats_.lines, 4u);
  EXPECT_EQ(stats_.errors, 1u);
}

TEST_F(BlockReaderTest, DuplicateIdsAndContextOverflowAreErrors) {
  const auto blocks = ReadAll(Line("a", "hi") + Line("a", "again") + Line("long", "abcdefghij", 30),
                              {}, 8, 32);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(RequestAt(blocks[0], 0).request.custom_id, "a");
  EXPECT_EQ(ErrorAt(blocks[0], 1).code, "duplicate_custom_id");
  EXPECT_EQ(ErrorAt(blocks[0], 2).code, "context_length_exceeded");
  EXPECT_NE(ErrorAt(blocks[0], 2).message.find("11 tokens"), std::string::npos);
}

TEST_F(BlockReaderTest, SkipsWhatTheJournalHolds) {
  OutputJournal journal;
  journal.completed_ids = {"a"};
  journal.error_lines = {2};
  const auto blocks = ReadAll(Line("a", "hi") + "not json\n" + Line("b", "yo"), journal);
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].entries.size(), 1u);
  EXPECT_EQ(RequestAt(blocks[0], 0).request.custom_id, "b");
  EXPECT_EQ(stats_.already_done, 2u);  // "a" and the error of line 2
}

// A blank line is answered like any line that cannot run, and a rerun finds its error line in
// the journal by its line number.
TEST_F(BlockReaderTest, BlankLinesGetErrorsThatAResumeSkips) {
  const std::string input = Line("a", "hi") + "\n" + " \t\r\n" + Line("b", "yo");
  const auto blocks = ReadAll(input, {}, /*block_size=*/4);
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].entries.size(), 4u);
  EXPECT_EQ(ErrorAt(blocks[0], 1).code, "empty_line");
  EXPECT_EQ(ErrorAt(blocks[0], 1).line_number, 2u);
  EXPECT_EQ(ErrorAt(blocks[0], 2).code, "empty_line");
  EXPECT_EQ(ErrorAt(blocks[0], 2).line_number, 3u);

  OutputJournal journal;
  journal.completed_ids = {"a", "b"};
  journal.error_lines = {2, 3};
  EXPECT_TRUE(ReadAll(input, journal).empty());
  EXPECT_EQ(stats_.already_done, 4u);
}

std::vector<std::string> Ids(const Block& b) {
  std::vector<std::string> ids;
  for (const BlockEntry& e : b.entries) {
    if (const auto* t = std::get_if<TokenizedRequest>(&e)) {
      ids.push_back(t->request.custom_id);
    } else {
      ids.push_back("!" + std::to_string(std::get<RequestError>(e).line_number));
    }
  }
  return ids;
}

using Names = std::vector<std::string>;

TEST_F(BlockReaderTest, SortsAWindowByPromptLength) {
  BlockReaderOptions o;
  o.block_size = 2;
  o.sort_window = 4;
  o.context_length = 64;
  // Window 1: a(5) b(1) c(3) d(2) and the bad line 3; window 2 starts with e.
  const auto blocks = ReadAll(Line("a", "xxxxx") + Line("b", "x") + "[]\n" + Line("c", "xxx") +
                                  Line("d", "xx") + Line("e", "xxxx") + Line("f", "x"),
                              o);
  ASSERT_EQ(blocks.size(), 3u);
  // Shortest first; within a block, input order; the window's errors ride with its first block.
  EXPECT_EQ(Ids(blocks[0]), (Names{"b", "!3", "d"}));
  EXPECT_EQ(Ids(blocks[1]), (Names{"a", "c"}));
  EXPECT_EQ(Ids(blocks[2]), (Names{"e", "f"}));
}

TEST_F(BlockReaderTest, LeftoversWaitForTheNextWindow) {
  BlockReaderOptions o;
  o.block_size = 2;
  o.sort_window = 3;
  o.context_length = 64;
  // Window 1 (a, b, c) yields one block of its two shortest; c waits and pairs with d.
  const auto blocks = ReadAll(Line("a", "x") + Line("b", "xx") + Line("c", "xxxxxx") +
                                  Line("d", "xxxxx") + Line("e", "xxx"),
                              o);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(Ids(blocks[0]), (Names{"a", "b"}));
  EXPECT_EQ(Ids(blocks[1]), (Names{"d", "e"}));
  EXPECT_EQ(Ids(blocks[2]), (Names{"c"}));
}

TEST_F(BlockReaderTest, ReadsOnlyItsShard) {
  std::string input;
  for (int i = 0; i < 20; ++i) input += Line("r" + std::to_string(i), "x");
  input += "bad\n";  // line 21: no id, so shard (21 - 1) % 3 = 2
  std::multiset<std::string> all;
  for (int shard = 0; shard < 3; ++shard) {
    BlockReaderOptions o;
    o.block_size = 4;
    o.context_length = 64;
    o.shard = ShardSpec{shard, 3};
    for (const Block& b : ReadAll(input, o)) {
      for (const std::string& id : Ids(b)) all.insert(id);
    }
    EXPECT_EQ(stats_.lines, 21u);
    EXPECT_EQ(stats_.other_shard + stats_.requests + stats_.errors, 21u);
    EXPECT_EQ(stats_.errors, shard == 2 ? 1u : 0u);
  }
  EXPECT_EQ(all.size(), 21u);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 21u);
}

TEST_F(BlockReaderTest, RendersChatRequestsWithTheTemplate) {
  BlockReaderOptions o;
  o.block_size = 4;
  o.context_length = 256;
  o.chat_template = ChatTemplate::FromJinja("<|im_start|> <|im_end|>");
  const std::string chat = R"({"custom_id":"c","url":"/v1/chat/completions","body":{"messages":)"
                           R"([{"role":"user","content":"hi"}]}})" "\n";
  auto blocks = ReadAll(chat + "{bad\n", o);
  ASSERT_EQ(blocks.size(), 1u);
  const TokenizedRequest& t = RequestAt(blocks[0], 0);
  EXPECT_EQ(t.request.prompt, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.prompt_ids.size(), t.request.prompt.size());  // no BOS: the template has none
  // The invalid line after an OpenAI line answers in the OpenAI format.
  EXPECT_TRUE(IsOpenAi(ErrorAt(blocks[0], 1).format));

  o.chat_template = ChatTemplate();
  blocks = ReadAll(chat, o);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(ErrorAt(blocks[0], 0).code, "unsupported_chat_template");
  EXPECT_EQ(ErrorAt(blocks[0], 0).custom_id, "c");
}

// The journal keys errors by line: a duplicate's error line done does not mark its id done.
TEST_F(BlockReaderTest, DuplicateErrorInTheJournalDoesNotSkipTheOriginal) {
  OutputJournal journal;
  journal.error_lines = {2};
  const auto blocks = ReadAll(Line("a", "hi") + Line("a", "dup"), journal);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(Ids(blocks[0]), (Names{"a"}));
  EXPECT_EQ(stats_.already_done, 1u);
}

TEST_F(BlockReaderTest, MissingInputIsNotFound) {
  BlockReaderOptions o;
  o.context_length = 8;
  auto reader = BlockReader::Open(Path("missing.jsonl"), tokenizer_, o, {});
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata
