#include "src/job/output_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "src/job/jsonl_reader.h"
#include "src/job/request.h"
#include "tests/job/temp_files.h"

namespace strata {
namespace {

using Json = nlohmann::json;

std::string CompletionFor(const std::string& id) {
  return FormatCompletionLine(Completion{id, "text of " + id, 3, 2, FinishReason::kStop});
}

// Writes one flush per group of ids.
void WriteFlushes(const std::string& path, const std::vector<std::vector<std::string>>& flushes) {
  auto writer = OutputWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& ids : flushes) {
    for (const std::string& id : ids) (*writer)->Append(CompletionFor(id));
    ASSERT_TRUE((*writer)->Flush().ok());
  }
}

// The custom_ids of every line the reader returns, checking each line is valid JSON.
std::vector<std::string> ReadIds(const std::string& path) {
  std::vector<std::string> ids;
  auto reader = JsonlReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return ids;
  JsonlLine line;
  while (true) {
    auto more = (*reader)->Next(&line);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) return ids;
    const Json j = Json::parse(line.text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << line.text;
    if (!j.is_discarded()) ids.push_back(j["custom_id"].get<std::string>());
  }
}

using Ids = std::unordered_set<std::string>;
using Order = std::vector<std::string>;

class OutputWriterTest : public TempDirTest {};

TEST_F(OutputWriterTest, PlainWriteRecoverTornTailAndAppend) {
  const std::string path = Path("out.jsonl");
  WriteFlushes(path, {{"a", "b"}, {"c"}});
  const std::string flushed = ReadBytes(path);
  WriteBytes(path, R"({"custom_id":"d","text":"half a li)", /*append=*/true);

  auto writer = OutputWriter::Open(path);
  EXPECT_EQ(writer.status().code(), StatusCode::kCorrupt);  // must recover first

  auto journal = RecoverOutputJournal(path);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_EQ(journal->completed_ids, (Ids{"a", "b", "c"}));
  EXPECT_EQ(journal->lines, 3u);
  EXPECT_GT(journal->dropped_bytes, 0u);
  EXPECT_EQ(ReadBytes(path), flushed);

  WriteFlushes(path, {{"d"}});
  EXPECT_EQ(ReadIds(path), (Order{"a", "b", "c", "d"}));
  journal = RecoverOutputJournal(path);
  ASSERT_TRUE(journal.ok());
  EXPECT_EQ(journal->dropped_bytes, 0u);
  EXPECT_EQ(journal->completed_ids.size(), 4u);
}

TEST_F(OutputWriterTest, UnflushedLinesAreNotWritten) {
  const std::string path = Path("out.jsonl");
  {
    auto writer = OutputWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    (*writer)->Append(CompletionFor("a"));
    ASSERT_TRUE((*writer)->Flush().ok());
    ASSERT_TRUE((*writer)->Flush().ok());  // nothing pending
    (*writer)->Append(CompletionFor("lost"));
  }
  EXPECT_EQ(ReadIds(path), (Order{"a"}));
}

// Error lines are remembered by input line, with or without an id; completions by id.
TEST_F(OutputWriterTest, ErrorLinesAreRememberedByLine) {
  const std::string path = Path("out.jsonl");
  {
    auto writer = OutputWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    (*writer)->Append(FormatErrorLine(RequestError{"", 4, "invalid_json", "not JSON"}));
    (*writer)->Append(FormatErrorLine(RequestError{"x", 5, "empty_prompt", "empty"}));
    ASSERT_TRUE((*writer)->Flush().ok());
  }
  auto journal = RecoverOutputJournal(path);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_TRUE(journal->completed_ids.empty());
  EXPECT_EQ(journal->error_lines, (std::unordered_set<uint64_t>{4, 5}));
  EXPECT_EQ(journal->lines, 2u);
}

TEST_F(OutputWriterTest, ZstdFramePerFlushSurvivesTruncation) {
  const std::string path = Path("out.jsonl.zst");
  WriteFlushes(path, {{"a", "b"}, {"c"}});
  const std::string two_frames = ReadBytes(path);
  WriteFlushes(path, {{"d", "e"}});
  EXPECT_EQ(ReadIds(path), (Order{"a", "b", "c", "d", "e"}));

  // Cut the third frame in half, as a crash during its write would.
  const std::string all = ReadBytes(path);
  WriteBytes(path, all.substr(0, two_frames.size() + (all.size() - two_frames.size()) / 2));
  auto journal = RecoverOutputJournal(path);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_EQ(journal->completed_ids, (Ids{"a", "b", "c"}));
  EXPECT_EQ(ReadBytes(path), two_frames);

  WriteFlushes(path, {{"d2"}});
  EXPECT_EQ(ReadIds(path), (Order{"a", "b", "c", "d2"}));
}

TEST_F(OutputWriterTest, ZstdFrameWithTornLineIsDropped) {
  const std::string path = Path("out.zst");
  WriteFlushes(path, {{"a"}});
  const std::string good = ReadBytes(path);
  WriteBytes(path, ZstdFrame(CompletionFor("b") + "\n{\"custom_id\":\"c\""), /*append=*/true);
  auto journal = RecoverOutputJournal(path);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_EQ(journal->completed_ids, (Ids{"a"}));
  EXPECT_EQ(ReadBytes(path), good);
}

// Flushes larger than the read windows, so that lines and frames straddle window edges.
TEST_F(OutputWriterTest, LargeFlushesRecover) {
  std::mt19937 rng(7);
  std::string text(5000, ' ');
  for (const char* name : {"big.jsonl", "big.jsonl.zst"}) {
    const std::string path = Path(name);
    Order written;
    {
      auto writer = OutputWriter::Open(path);
      ASSERT_TRUE(writer.ok());
      for (int flush = 0; flush < 3; ++flush) {
        for (int i = 0; i < 400; ++i) {
          for (char& c : text) c = static_cast<char>('a' + rng() % 26);
          written.push_back(std::to_string(flush) + "-" + std::to_string(i));
          (*writer)->Append(FormatCompletionLine(Completion{written.back(), text, 1, 1}));
        }
        ASSERT_TRUE((*writer)->Flush().ok());
      }
    }
    const std::string all = ReadBytes(path);
    WriteBytes(path, all.substr(0, all.size() - 1000));
    auto journal = RecoverOutputJournal(path);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    const size_t kept = std::string(name).ends_with(".zst") ? 800 : 1199;
    EXPECT_EQ(journal->completed_ids.size(), kept) << name;
    EXPECT_EQ(ReadIds(path), Order(written.begin(), written.begin() + kept)) << name;
  }
}

// A crash while the first frame's magic bytes were being written leaves 1-3 bytes of them.
TEST_F(OutputWriterTest, ZstdOutputCutInsideTheMagicIsATornTail) {
  const std::string path = Path("out.jsonl.zst");
  WriteBytes(path, std::string("\x28\xB5", 2));
  auto journal = RecoverOutputJournal(path);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_EQ(journal->dropped_bytes, 2u);
  EXPECT_EQ(ReadBytes(path), "");
  WriteFlushes(path, {{"a"}});
  EXPECT_EQ(ReadIds(path), (Order{"a"}));
}

TEST_F(OutputWriterTest, MissingFileIsAnEmptyJournal) {
  auto journal = RecoverOutputJournal(Path("none.jsonl"));
  ASSERT_TRUE(journal.ok());
  EXPECT_TRUE(journal->completed_ids.empty());
  EXPECT_EQ(journal->lines, 0u);
}

TEST_F(OutputWriterTest, ForeignFileIsCorrupt) {
  WriteBytes(Path("notes.txt"), "dear diary\n");
  auto journal = RecoverOutputJournal(Path("notes.txt"));
  EXPECT_EQ(journal.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(journal.status().message().find("line 1"), std::string::npos);
  EXPECT_EQ(ReadBytes(Path("notes.txt")), "dear diary\n");
}

TEST_F(OutputWriterTest, MissingDirectoryIsNotFound) {
  auto writer = OutputWriter::Open(Path("no/such/dir/out.jsonl"));
  EXPECT_EQ(writer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(writer.status().message().find(Path("no/such/dir")), std::string::npos);
}

TEST_F(OutputWriterTest, NewlineInLineIsABug) {
  auto writer = OutputWriter::Open(Path("out.jsonl"));
  ASSERT_TRUE(writer.ok());
  EXPECT_DEATH((*writer)->Append("a\nb"), "check failed");
}

}  // namespace
}  // namespace strata
