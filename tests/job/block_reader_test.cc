#include "src/job/block_reader.h"

#include <gtest/gtest.h>

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
    WriteBytes(Path("in.jsonl"), input);
    BlockReaderOptions o;
    o.block_size = block_size;
    o.context_length = context;
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
  journal.custom_ids = {"a"};
  journal.error_lines = {2};
  const auto blocks = ReadAll(Line("a", "hi") + "not json\n" + Line("b", "yo"), journal);
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].entries.size(), 1u);
  EXPECT_EQ(RequestAt(blocks[0], 0).request.custom_id, "b");
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
