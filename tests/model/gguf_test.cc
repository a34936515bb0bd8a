#include "src/model/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "src/io/mapped_file.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::Append;
using testing_files::AppendString;
using testing_files::F32Bytes;
using testing_files::FreshDir;
using testing_files::GgufWriter;
using testing_files::WriteFile;

// A small file touching every metadata value type, nested arrays and two tensors.
GgufWriter SmallGguf() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddKv("u8", 0, std::string(1, '\xfe'));
  w.AddKv("i8", 1, std::string(1, '\xfe'));
  std::string p;
  Append<uint16_t>(&p, 65535);
  w.AddKv("u16", 2, p);
  p.clear();
  Append<int16_t>(&p, -300);
  w.AddKv("i16", 3, p);
  w.AddU32("u32", 4000000000u);
  p.clear();
  Append<int32_t>(&p, -7);
  w.AddKv("i32", 5, p);
  w.AddF32("f32", 0.5f);
  w.AddBool("bool", true);
  p.clear();
  Append<uint64_t>(&p, uint64_t{1} << 40);
  w.AddKv("u64", 10, p);
  p.clear();
  Append<int64_t>(&p, -(int64_t{1} << 40));
  w.AddKv("i64", 11, p);
  p.clear();
  Append<double>(&p, 2.25);
  w.AddKv("f64", 12, p);
  w.AddStringArray("strings", {"a", "", "ccc"});
  w.AddI32Array("ints", {3, -1, 6});
  p.clear();  // [["x", "y"], ["z"]]
  Append<uint32_t>(&p, 9);
  Append<uint64_t>(&p, 2);
  Append<uint32_t>(&p, 8);
  Append<uint64_t>(&p, 2);
  AppendString(&p, "x");
  AppendString(&p, "y");
  Append<uint32_t>(&p, 8);
  Append<uint64_t>(&p, 1);
  AppendString(&p, "z");
  w.AddKv("nested", 9, p);
  w.AddTensor("a", {4, 2}, 0, F32Bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  w.AddTensor("b", {3}, 0, F32Bytes({9, 10, 11}));
  return w;
}

class GgufTest : public ::testing::Test {
 protected:
  // Writes `bytes` and parses them.
  Result<GgufFile> ParseBytes(const std::string& bytes) {
    const auto path = dir_ / "m.gguf";
    file_.reset();
    WriteFile(path, bytes);
    auto file = MappedFile::Open(path.string());
    if (!file.ok()) return file.status();
    file_ = std::move(file).value();
    return GgufFile::Parse(*file_);
  }

  // Parses `bytes` and expects failure with `code` and a message containing `needle`.
  void ExpectError(const std::string& bytes, StatusCode code, const std::string& needle) {
    auto g = ParseBytes(bytes);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), code) << g.status().ToString();
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().ToString();
    EXPECT_NE(g.status().message().find("m.gguf"), std::string::npos) << g.status().ToString();
  }

  std::filesystem::path dir_ = FreshDir();
  std::unique_ptr<MappedFile> file_;
};

TEST_F(GgufTest, ParsesEveryValueType) {
  auto g = ParseBytes(SmallGguf().Build());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 32u);
  EXPECT_EQ(*g->Find("general.architecture")->AsString(), "llama");
  EXPECT_EQ(*g->Find("u8")->AsInt(), 254);
  EXPECT_EQ(*g->Find("i8")->AsInt(), -2);
  EXPECT_EQ(*g->Find("u16")->AsInt(), 65535);
  EXPECT_EQ(*g->Find("i16")->AsInt(), -300);
  EXPECT_EQ(*g->Find("u32")->AsInt(), 4000000000);
  EXPECT_EQ(*g->Find("i32")->AsInt(), -7);
  EXPECT_EQ(*g->Find("f32")->AsFloat(), 0.5);
  EXPECT_FALSE(g->Find("f32")->AsInt().has_value());
  EXPECT_EQ(*g->Find("bool")->AsBool(), true);
  EXPECT_EQ(*g->Find("u64")->AsInt(), int64_t{1} << 40);
  EXPECT_EQ(*g->Find("i64")->AsInt(), -(int64_t{1} << 40));
  EXPECT_EQ(*g->Find("f64")->AsFloat(), 2.25);
  EXPECT_EQ(g->Find("strings")->strings(), (std::vector<std::string>{"a", "", "ccc"}));
  const GgufValue* ints = g->Find("ints");
  ASSERT_EQ(ints->size(), 3u);
  EXPECT_EQ(*ints->IntAt(1), -1);
  EXPECT_EQ(*ints->IntAt(2), 6);
  const GgufValue* nested = g->Find("nested");
  ASSERT_EQ(nested->arrays().size(), 2u);
  EXPECT_EQ(nested->arrays()[0].strings(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(nested->arrays()[1].strings(), (std::vector<std::string>{"z"}));
  EXPECT_EQ(g->Find("missing"), nullptr);

  ASSERT_EQ(g->tensors().size(), 2u);
  const GgufTensorInfo* a = g->FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->Shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(a->bytes, 32u);
  EXPECT_EQ(a->offset % 32, 0u);
  const auto* b = reinterpret_cast<const float*>(g->TensorData(*g->FindTensor("b")));
  EXPECT_EQ(b[2], 11.0f);
}

TEST_F(GgufTest, AcceptsVersion2AndCustomAlignment) {
  GgufWriter w = SmallGguf();
  w.AddU32("general.alignment", 64);
  auto g = ParseBytes(w.Build(2, 64));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->version(), 2u);
  EXPECT_EQ(g->alignment(), 64u);
  EXPECT_EQ(g->data_offset() % 64, 0u);
  EXPECT_EQ(reinterpret_cast<const float*>(g->TensorData(*g->FindTensor("b")))[0], 9.0f);
}

TEST_F(GgufTest, EveryTruncationFails) {
  const std::string bytes = SmallGguf().Build();
  const auto path = dir_ / "cut.gguf";
  WriteFile(path, bytes);
  for (size_t n = bytes.size(); n-- > 0;) {
    std::filesystem::resize_file(path, n);
    auto file = MappedFile::Open(path.string());
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto g = GgufFile::Parse(**file);
    ASSERT_FALSE(g.ok()) << "truncated to " << n << " bytes";
    EXPECT_EQ(g.status().code(), StatusCode::kCorrupt) << n << ": " << g.status().ToString();
  }
}

TEST_F(GgufTest, RandomByteFlipsNeverCrash) {
  const std::string bytes = SmallGguf().Build();
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int iter = 0; iter < 200; ++iter) {
    std::string mutated = bytes;
    for (int k = 0; k < 3; ++k) {
      // Mostly the header, where lengths and counts live.
      const size_t at = rng() % std::min<size_t>(mutated.size(), 400);
      mutated[at] = static_cast<char>(rng());
    }
    auto g = ParseBytes(mutated);
    if (g.ok()) {
      ++parsed;
      for (const GgufTensorInfo& t : g->tensors()) EXPECT_TRUE(file_->Contains(t.offset, t.bytes));
    } else {
      EXPECT_FALSE(g.status().message().empty());
    }
  }
  EXPECT_LT(parsed, 200);
}

TEST_F(GgufTest, BadMagicAndVersion) {
  std::string bytes = SmallGguf().Build();
  bytes[0] = 'X';
  ExpectError(bytes, StatusCode::kCorrupt, "magic");
  ExpectError(SmallGguf().Build(1), StatusCode::kUnsupported, "version 1");
  ExpectError(SmallGguf().Build(4), StatusCode::kUnsupported, "version 4");
}

TEST_F(GgufTest, TensorOffsetPastTheEnd) {
  GgufWriter w = SmallGguf();
  w.AddTensor("far", {8}, 0, F32Bytes(std::vector<float>(8)), uint64_t{1} << 20);
  ExpectError(w.Build(), StatusCode::kCorrupt, "'far'");
  GgufWriter huge = SmallGguf();
  huge.AddTensor("wrap", {8}, 0, F32Bytes(std::vector<float>(8)), UINT64_MAX - 31);
  ExpectError(huge.Build(), StatusCode::kCorrupt, "'wrap'");
  GgufWriter odd = SmallGguf();
  odd.AddTensor("odd", {1}, 0, F32Bytes({1}), 4);
  ExpectError(odd.Build(), StatusCode::kCorrupt, "alignment");
}

TEST_F(GgufTest, HugeLengthsAndCounts) {
  GgufWriter s;
  std::string p;
  Append<uint64_t>(&p, uint64_t{1} << 62);
  s.AddKv("k", 8, p);
  ExpectError(s.Build(), StatusCode::kCorrupt, "string length");

  GgufWriter a;
  p.clear();
  Append<uint32_t>(&p, 4);
  Append<uint64_t>(&p, UINT64_MAX / 2);
  a.AddKv("arr", 9, p);
  ExpectError(a.Build(), StatusCode::kCorrupt, "array length");

  GgufWriter sa;
  p.clear();
  Append<uint32_t>(&p, 8);
  Append<uint64_t>(&p, uint64_t{1} << 40);
  sa.AddKv("strs", 9, p);
  ExpectError(sa.Build(), StatusCode::kCorrupt, "array length");

  std::string bytes = SmallGguf().Build();
  std::memset(&bytes[8], 0xff, 8);  // tensor count
  ExpectError(bytes, StatusCode::kCorrupt, "tensor count");
  bytes = SmallGguf().Build();
  std::memset(&bytes[16], 0x7f, 8);  // metadata count
  ExpectError(bytes, StatusCode::kCorrupt, "metadata count");
}

TEST_F(GgufTest, DeepNestingAndUnknownValueType) {
  GgufWriter deep;
  std::string p;
  for (int i = 0; i < 64; ++i) {
    Append<uint32_t>(&p, 9);
    Append<uint64_t>(&p, 1);
  }
  deep.AddKv("deep", 9, p);
  ExpectError(deep.Build(), StatusCode::kCorrupt, "too deeply");
  GgufWriter bad;
  bad.AddKv("k", 13, std::string(8, '\0'));
  ExpectError(bad.Build(), StatusCode::kCorrupt, "unknown value type 13");
}

TEST_F(GgufTest, TensorShapeErrors) {
  GgufWriter unknown = SmallGguf();
  unknown.AddTensor("mystery", {32}, 77, std::string(64, '\0'));
  ExpectError(unknown.Build(), StatusCode::kUnsupported, "'mystery' has unknown ggml type 77");
  GgufWriter overflow;
  overflow.AddTensor("big", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, "");
  ExpectError(overflow.Build(), StatusCode::kCorrupt, "overflows");
  GgufWriter blocks;
  blocks.AddTensor("q", {33}, 8, std::string(68, '\0'));
  ExpectError(blocks.Build(), StatusCode::kCorrupt, "block size");
  GgufWriter dims;
  dims.AddTensor("d", {1, 1, 1, 1, 1}, 0, F32Bytes({1}));
  ExpectError(dims.Build(), StatusCode::kCorrupt, "dimensions");
  GgufWriter dup = SmallGguf();
  dup.AddTensor("a", {1}, 0, F32Bytes({1}));
  ExpectError(dup.Build(), StatusCode::kCorrupt, "duplicate tensor");
}

TEST_F(GgufTest, BadAlignment) {
  GgufWriter w = SmallGguf();
  w.AddU32("general.alignment", 48);
  ExpectError(w.Build(), StatusCode::kCorrupt, "alignment");
}

TEST(GgmlTypeTest, Names) {
  EXPECT_EQ(GgmlTypeName(3), "Q4_1");
  EXPECT_EQ(GgmlTypeName(12), "Q4_K");
  EXPECT_EQ(GgmlTypeName(77), "type 77");
  EXPECT_EQ(GgmlTypeInfo(8)->type_bytes, 34u);
}

}  // namespace
}  // namespace strata
