// Helpers for the src/io tests: fresh directories and recognisable byte patterns.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace strata::io_testing {

// A fresh empty directory under the test temp dir, named after the running test.
inline std::filesystem::path FreshDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("strata_io_") + info->test_suite_name() + "_" + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterised test names
  }
  const auto dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Byte i of a pattern that differs for every 8-byte word and every `seed`.
inline uint8_t PatternByte(uint64_t i, uint64_t seed) {
  const uint64_t word = (i / 8 + 1) * 0x9E3779B97F4A7C15ull + seed * 0xC2B2AE3D27D4EB4Full;
  return static_cast<uint8_t>(word >> (8 * (i % 8)));
}

inline void FillPattern(uint8_t* p, size_t n, uint64_t seed, uint64_t first = 0) {
  for (size_t i = 0; i < n; ++i) p[i] = PatternByte(first + i, seed);
}

// Index of the first byte of [p, p + n) that differs from the pattern, or n.
inline size_t FirstMismatch(const uint8_t* p, size_t n, uint64_t seed, uint64_t first = 0) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != PatternByte(first + i, seed)) return i;
  }
  return n;
}

}  // namespace strata::io_testing
