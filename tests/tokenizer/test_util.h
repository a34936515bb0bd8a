// Helpers shared by the tokenizer tests: golden data paths, JSON files and scratch directories.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace strata::testing_util {

inline std::string TokenizerDataPath(const std::string& name) {
  return std::string(STRATA_SOURCE_DIR) + "/tests/data/tokenizer/" + name;
}

// Parses `path`; an empty object (and a test failure) when it cannot be read.
inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json parsed = nlohmann::json::parse(text.str(), nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << path;
  return parsed.is_discarded() ? nlohmann::json::object() : parsed;
}

// A fresh empty directory under the test temp dir, named after the running test and the call's
// place among its calls, so that runs reuse their directories instead of adding new ones.
inline std::filesystem::path ScratchDir() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "strata_tokenizer_";
  if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name() + "_";
  name += std::to_string(counter++);
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterised test names
  }
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Byte strings printed as escaped text in failure messages.
inline std::string Escaped(const std::string& bytes) {
  std::ostringstream out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out << c;
    } else {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02X", c);
      out << buffer;
    }
  }
  return out.str();
}

}  // namespace strata::testing_util
