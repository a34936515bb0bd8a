#include "src/job/jsonl_reader.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/job/temp_files.h"

namespace strata {
namespace {

struct ReadAll {
  std::vector<JsonlLine> lines;
  Status status;  // the first error, or ok after the end
};

ReadAll ReadLines(const std::string& path, const JsonlReaderOptions& options = {}) {
  ReadAll out;
  auto reader = JsonlReader::Open(path, options);
  if (!reader.ok()) {
    out.status = reader.status();
    return out;
  }
  JsonlLine line;
  while (true) {
    auto more = (*reader)->Next(&line);
    if (!more.ok()) {
      out.status = more.status();
      // The error is sticky.
      EXPECT_EQ((*reader)->Next(&line).status().message(), out.status.message());
      return out;
    }
    if (!*more) return out;
    out.lines.push_back(line);
  }
}

// "line <n>" for lines 1..count, each with a newline.
std::string NumberedLines(int first, int count) {
  std::string s;
  for (int i = first; i < first + count; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

const std::string kMixed = "\xEF\xBB\xBF{\"a\":1}\r\n\r\n  \t\n{\"b\":2}\n\n{\"c\":3}\r\n{\"d\":4}";

// Blank lines are handed out too: each input line gets a result line.
void ExpectMixed(const ReadAll& r) {
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<std::string> texts = {"{\"a\":1}", "", "  \t", "{\"b\":2}", "",
                                          "{\"c\":3}", "{\"d\":4}"};
  ASSERT_EQ(r.lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(r.lines[i].text, texts[i]);
    EXPECT_EQ(r.lines[i].line_number, i + 1);
    EXPECT_FALSE(r.lines[i].too_long);
  }
}

class JsonlReaderTest : public TempDirTest {};

TEST_F(JsonlReaderTest, PlainWithBomCrlfBlankLinesAndNoFinalNewline) {
  WriteBytes(Path("in.jsonl"), kMixed);
  ExpectMixed(ReadLines(Path("in.jsonl")));
}

TEST_F(JsonlReaderTest, ZstdBySuffixAndByMagic) {
  WriteBytes(Path("in.jsonl.zst"), ZstdFrame(kMixed));
  ExpectMixed(ReadLines(Path("in.jsonl.zst")));
  WriteBytes(Path("in.jsonl"), ZstdFrame(kMixed));
  ExpectMixed(ReadLines(Path("in.jsonl")));
}

TEST_F(JsonlReaderTest, ZstdFramesConcatenate) {
  // A frame boundary in the middle of a line must not split it.
  WriteBytes(Path("in.zst"), ZstdFrame(NumberedLines(1, 3) + "li") +
                                 ZstdFrame("ne 4\n" + NumberedLines(5, 2)));
  const ReadAll r = ReadLines(Path("in.zst"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.lines.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.lines[i].text, "line " + std::to_string(i + 1));
}

// Frames whose content ends exactly where a decode buffer fills (the reader decodes 256 KiB at a
// time) must not look truncated.
TEST_F(JsonlReaderTest, FrameEndingOnABufferEdge) {
  const std::string line(1023, 'q');
  std::string frame;
  for (int i = 0; i < 256; ++i) frame += line + "\n";
  ASSERT_EQ(frame.size(), size_t{256} << 10);
  WriteBytes(Path("edge.zst"), ZstdFrame(frame) + ZstdFrame(frame));
  const ReadAll r = ReadLines(Path("edge.zst"));
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.lines.size(), 512u);
}

TEST_F(JsonlReaderTest, LinesLargerThanTheBuffers) {
  const std::string big(3 << 20, 'x');
  const std::string content = "a\n" + big + "\nb\n";
  WriteBytes(Path("big.jsonl"), content);
  WriteBytes(Path("big.jsonl.zst"), ZstdFrame(content));
  for (const char* name : {"big.jsonl", "big.jsonl.zst"}) {
    const ReadAll r = ReadLines(Path(name));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(r.lines.size(), 3u);
    EXPECT_EQ(r.lines[1].text, big);
    EXPECT_EQ(r.lines[2].text, "b");
  }
}

TEST_F(JsonlReaderTest, OverLongLinesAreFlaggedAndSkipped) {
  const std::string at_limit(100, 'y');
  WriteBytes(Path("long.jsonl"), "short\n" + std::string(5000, 'x') + "\n" + at_limit + "\n" +
                                     at_limit + "\r\n" + at_limit + "z\nafter\n" +
                                     std::string(1000, 'w'));
  JsonlReaderOptions options;
  options.max_line_bytes = 100;
  const ReadAll r = ReadLines(Path("long.jsonl"), options);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.lines.size(), 7u);
  const std::vector<bool> too_long = {false, true, false, false, true, false, true};
  for (size_t i = 0; i < r.lines.size(); ++i) {
    EXPECT_EQ(r.lines[i].line_number, i + 1);
    EXPECT_EQ(r.lines[i].too_long, too_long[i]) << "line " << i + 1;
    if (too_long[i]) {
      EXPECT_TRUE(r.lines[i].text.empty());
    }
  }
  EXPECT_EQ(r.lines[2].text, at_limit);
  EXPECT_EQ(r.lines[3].text, at_limit);
  EXPECT_EQ(r.lines[5].text, "after");
}

TEST_F(JsonlReaderTest, TruncatedZstdYieldsLinesThenCorrupt) {
  const std::string first = ZstdFrame(NumberedLines(1, 100));
  const std::string second = ZstdFrame(NumberedLines(101, 100));
  WriteBytes(Path("cut.jsonl.zst"), first + second.substr(0, second.size() / 2));
  const ReadAll r = ReadLines(Path("cut.jsonl.zst"));
  ASSERT_GE(r.lines.size(), 100u);
  ASSERT_LT(r.lines.size(), 200u);
  for (size_t i = 0; i < r.lines.size(); ++i) {
    EXPECT_EQ(r.lines[i].text, "line " + std::to_string(i + 1));
  }
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status.message().find(Path("cut.jsonl.zst")), std::string::npos);
  EXPECT_NE(r.status.message().find("truncated"), std::string::npos);
  EXPECT_NE(r.status.message().find("byte"), std::string::npos);
}

TEST_F(JsonlReaderTest, DamagedZstdIsCorrupt) {
  std::string frame = ZstdFrame(NumberedLines(1, 50)) + ZstdFrame(NumberedLines(51, 50));
  frame += "garbage that is not a zstd frame";
  WriteBytes(Path("bad.zst"), frame);
  const ReadAll r = ReadLines(Path("bad.zst"));
  EXPECT_EQ(r.lines.size(), 100u);
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status.message().find("corrupt zstd data"), std::string::npos);
}

TEST_F(JsonlReaderTest, ZstSuffixWithoutMagicIsCorrupt) {
  WriteBytes(Path("plain.zst"), "{\"a\":1}\n");
  const ReadAll r = ReadLines(Path("plain.zst"));
  EXPECT_EQ(r.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status.message().find(".zst"), std::string::npos);
}

TEST_F(JsonlReaderTest, EmptyFiles) {
  WriteBytes(Path("empty.jsonl"), "");
  WriteBytes(Path("empty.jsonl.zst"), "");
  WriteBytes(Path("empty_frame.zst"), ZstdFrame(""));
  for (const char* name : {"empty.jsonl", "empty.jsonl.zst", "empty_frame.zst"}) {
    const ReadAll r = ReadLines(Path(name));
    EXPECT_TRUE(r.status.ok()) << name << ": " << r.status.ToString();
    EXPECT_TRUE(r.lines.empty()) << name;
  }
  WriteBytes(Path("blank.jsonl"), "\n\r\n \n");
  const ReadAll blank = ReadLines(Path("blank.jsonl"));
  ASSERT_EQ(blank.lines.size(), 3u);
  EXPECT_EQ(blank.lines[2].text, " ");
  EXPECT_EQ(blank.lines[2].line_number, 3u);
}

TEST_F(JsonlReaderTest, MissingFileAndDirectory) {
  const ReadAll missing = ReadLines(Path("nope.jsonl"));
  EXPECT_EQ(missing.status.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status.message().find(Path("nope.jsonl")), std::string::npos);
  const ReadAll dir = ReadLines(dir_.string());
  EXPECT_EQ(dir.status.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
