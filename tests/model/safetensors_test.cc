#include "src/model/safetensors.h"

#include <gtest/gtest.h>

#include "src/io/mapped_file.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::Append;
using testing_files::Bf16Bytes;
using testing_files::F16Bytes;
using testing_files::F32Bytes;
using testing_files::FreshDir;
using testing_files::SafetensorsBytes;
using testing_files::SafetensorsEntry;
using testing_files::WriteFile;

std::vector<SafetensorsEntry> ThreeTensors() {
  return {{"w", "F32", {2, 3}, F32Bytes({1, 2, 3, 4, 5, 6})},
          {"h", "F16", {2}, F16Bytes({0.5f, -2.0f})},
          {"b", "BF16", {1, 1}, Bf16Bytes({3.0f})}};
}

class SafetensorsTest : public ::testing::Test {
 protected:
  // Writes `bytes` as one file and opens it as a checkpoint.
  Result<SafetensorsCheckpoint> OpenBytes(const std::string& bytes) {
    WriteFile(dir_ / "model.safetensors", bytes);
    return SafetensorsCheckpoint::OpenFile((dir_ / "model.safetensors").string());
  }

  void ExpectError(const std::string& bytes, StatusCode code, const std::string& needle) {
    auto c = OpenBytes(bytes);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), code) << c.status().ToString();
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().ToString();
  }

  std::filesystem::path dir_ = FreshDir();
};

TEST_F(SafetensorsTest, ReadsViews) {
  auto c = OpenBytes(SafetensorsBytes(ThreeTensors()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tensors().size(), 3u);
  const TensorView* w = c->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(static_cast<const float*>(w->data)[5], 6.0f);
  const TensorView* h = c->Find("h");
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_EQ(HalfToFloat(static_cast<const uint16_t*>(h->data)[1]), -2.0f);
  EXPECT_EQ(c->Find("b")->dtype, DType::kBF16);
  EXPECT_EQ(c->Find("__metadata__"), nullptr);
  EXPECT_EQ(c->TakeFiles().size(), 1u);
}

TEST_F(SafetensorsTest, HeaderErrors) {
  ExpectError("abc", StatusCode::kCorrupt, "too short");
  std::string huge;
  Append<uint64_t>(&huge, 1000);
  ExpectError(huge + "{}", StatusCode::kCorrupt, "header length 1000");
  std::string max;
  Append<uint64_t>(&max, UINT64_MAX);
  ExpectError(max + "{}", StatusCode::kCorrupt, "header length");
  std::string bad;
  Append<uint64_t>(&bad, 5);
  ExpectError(bad + "{\"a\":", StatusCode::kCorrupt, "not a JSON object");
  std::string list;
  Append<uint64_t>(&list, 2);
  ExpectError(list + "[]", StatusCode::kCorrupt, "not a JSON object");
}

TEST_F(SafetensorsTest, EntryErrors) {
  std::string bytes = SafetensorsBytes(ThreeTensors());
  ExpectError(bytes.substr(0, bytes.size() - 1), StatusCode::kCorrupt, "outside the data section");

  auto entries = ThreeTensors();
  entries[0].shape = {2, 2};
  ExpectError(SafetensorsBytes(entries), StatusCode::kCorrupt, "need 16");

  entries = ThreeTensors();
  entries.push_back({"q", "I8", {4}, std::string(4, '\0')});
  ExpectError(SafetensorsBytes(entries), StatusCode::kUnsupported, "'q' has dtype I8");
  entries.back().dtype = "F64";
  ExpectError(SafetensorsBytes(entries), StatusCode::kUnsupported, "dtype F64");

  const auto with_entry = [](const std::string& entry) {
    const std::string text = "{\"t\":" + entry + "}";
    std::string out;
    Append<uint64_t>(&out, text.size());
    return out + text + std::string(16, '\0');
  };
  ExpectError(with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"),
              StatusCode::kCorrupt, "outside");
  ExpectError(with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[8,24]})"),
              StatusCode::kCorrupt, "outside");
  ExpectError(with_entry(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
              StatusCode::kCorrupt, "shape");
  ExpectError(with_entry(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})"),
              StatusCode::kCorrupt, "shape");
  ExpectError(with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), StatusCode::kCorrupt,
              "data_offsets");
  ExpectError(with_entry(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})"), StatusCode::kCorrupt,
              "dtype");
  ExpectError(with_entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
              StatusCode::kCorrupt, "overflows");
  ExpectError(with_entry(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]})"),
              StatusCode::kCorrupt, "byte size overflows");
}

TEST_F(SafetensorsTest, MissingFile) {
  auto c = SafetensorsCheckpoint::OpenFile((dir_ / "nope.safetensors").string());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  auto d = SafetensorsCheckpoint::OpenDirectory(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("model.safetensors.index.json"), std::string::npos);
}

TEST_F(SafetensorsTest, ShardedIndex) {
  auto entries = ThreeTensors();
  WriteFile(dir_ / "model-00001-of-00002.safetensors", SafetensorsBytes({entries[0], entries[1]}));
  WriteFile(dir_ / "model-00002-of-00002.safetensors", SafetensorsBytes({entries[2]}));
  const std::string index = R"({"metadata": {"total_size": 18}, "weight_map": {
      "w": "model-00001-of-00002.safetensors", "h": "model-00001-of-00002.safetensors",
      "b": "model-00002-of-00002.safetensors"}})";
  WriteFile(dir_ / "model.safetensors.index.json", index);
  auto c = SafetensorsCheckpoint::OpenDirectory(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tensors().size(), 3u);
  EXPECT_EQ(Bf16ToFloat(*static_cast<const uint16_t*>(c->Find("b")->data)), 3.0f);
  EXPECT_EQ(c->TakeFiles().size(), 2u);
}

TEST_F(SafetensorsTest, IndexErrors) {
  WriteFile(dir_ / "a.safetensors", SafetensorsBytes(ThreeTensors()));
  const auto expect = [&](const std::string& index, StatusCode code, const std::string& needle) {
    WriteFile(dir_ / "model.safetensors.index.json", index);
    auto c = SafetensorsCheckpoint::OpenDirectory(dir_.string());
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), code) << c.status().ToString();
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().ToString();
  };
  expect(R"({"weight_map": {"w": "missing.safetensors"}})", StatusCode::kNotFound,
         "missing.safetensors");
  expect(R"({"weight_map": {"zz": "a.safetensors"}})", StatusCode::kCorrupt, "'zz'");
  expect(R"({"weight_map": {"w": "../a.safetensors"}})", StatusCode::kCorrupt, "shard file name");
  expect(R"({"weight_map": {"w": 3}})", StatusCode::kCorrupt, "shard file name");
  expect(R"({"weight_map": []})", StatusCode::kCorrupt, "weight_map");
  expect(R"({"weight_map": )", StatusCode::kCorrupt, "not valid JSON");
}

}  // namespace
}  // namespace strata
