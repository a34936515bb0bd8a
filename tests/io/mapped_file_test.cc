#include "src/io/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace strata {
namespace {

TEST(MappedFileTest, MapsContents) {
  const auto path = std::filesystem::temp_directory_path() / "strata_mapped_file_test.bin";
  { std::ofstream(path, std::ios::binary) << "hello"; }
  auto f = MappedFile::Open(path.string());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ((*f)->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->data()), 5), "hello");
  EXPECT_TRUE((*f)->Contains(0, 5));
  EXPECT_FALSE((*f)->Contains(1, 5));
  EXPECT_FALSE((*f)->Contains(3, UINT64_MAX));
  std::filesystem::remove(path);
}

TEST(MappedFileTest, MissingAndDirectory) {
  auto missing = MappedFile::Open("/nonexistent/strata/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = MappedFile::Open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
