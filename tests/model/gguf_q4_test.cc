// GgufQ4Planes: a GGUF file's Q4_0, Q4_1 and Q4_K blocks as 4-bit weight planes in groups of 32,
// read back by the format's definition (kernels/cpu/weight_q4.h) and held to the file's own
// values: ggml's expansion (strata's, which matches gguf-py bit for bit) and gguf-py's.
#include "src/model/gguf_q4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/core/dtype.h"
#include "src/model/gguf.h"
#include "src/model/gguf_dequant.h"
#include "tests/model/gguf_blocks.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::Append;

struct Planes {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> params;
};

Planes Convert(GgmlType type, const std::string& bytes, int64_t rows, int64_t cols,
               int unpermute_heads = 0) {
  Planes p{std::vector<uint8_t>(static_cast<size_t>(rows * cols / 2)),
           std::vector<uint16_t>(static_cast<size_t>(rows * cols / 32 * 2))};
  EXPECT_TRUE(GgufQ4Planes(static_cast<uint32_t>(type),
                           reinterpret_cast<const uint8_t*>(bytes.data()), rows, cols,
                           unpermute_heads, p.codes.data(), p.params.data()));
  return p;
}

// Element i of the planes: in group g = i / 32, byte j = i % 16 holds element j in its low nibble
// and element j + 16 in its high one; value = code * scale + minimum.
float Element(const Planes& p, int64_t i) {
  const int64_t g = i / 32, k = i % 32;
  const uint8_t byte = p.codes[static_cast<size_t>(16 * g + k % 16)];
  const int code = k < 16 ? byte & 0x0F : byte >> 4;
  return static_cast<float>(code) * HalfToFloat(p.params[static_cast<size_t>(2 * g)]) +
         HalfToFloat(p.params[static_cast<size_t>(2 * g + 1)]);
}

std::vector<float> Expected(GgmlType type, const std::string& bytes, int64_t rows, int64_t cols,
                            int unpermute_heads = 0) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const Status s =
      ExpandGgufTensor(static_cast<uint32_t>(type), reinterpret_cast<const uint8_t*>(bytes.data()),
                       {rows, cols}, unpermute_heads, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// `blocks` random Q4_0 (with_min false) or Q4_1 blocks.
std::string RandomBlocks(bool with_min, int blocks, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.001f, 0.2f), m(-2.0f, 0.5f);
  std::string out;
  for (int b = 0; b < blocks; ++b) {
    Append<uint16_t>(&out, FloatToHalf(d(rng)));
    if (with_min) Append<uint16_t>(&out, FloatToHalf(m(rng)));
    for (int j = 0; j < 16; ++j) out += static_cast<char>(rng() & 0xFF);
  }
  return out;
}

TEST(GgufQ4Test, Q4_0AndQ4_1BlocksGiveExactlyTheFilesValues) {
  constexpr int64_t kRows = 5, kCols = 96;  // three blocks a row
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    const std::string bytes =
        RandomBlocks(type == GgmlType::kQ4_1, kRows * kCols / 32, static_cast<unsigned>(type));
    const Planes p = Convert(type, bytes, kRows, kCols);
    const std::vector<float> want = Expected(type, bytes, kRows, kCols);
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      ASSERT_EQ(Element(p, i), want[static_cast<size_t>(i)])
          << GgmlTypeName(static_cast<uint32_t>(type)) << " element " << i;
    }
  }
}

TEST(GgufQ4Test, Q4_KBlocksAreGgufPysValuesUpToFp16Params) {
  // The fixture's three random Q4_K super-blocks as a [3, 256] matrix. A sub-block's scale d * sc
  // and minimum dmin * m are rounded to fp16, each by at most 2^-11 of itself.
  for (const testing_files::BlockFixture& f : testing_files::ReadBlockFixtures()) {
    if (f.name != "Q4_K") continue;
    const int64_t rows = static_cast<int64_t>(f.values.size()) / 256;
    ASSERT_EQ(rows, 3);
    const Planes p = Convert(GgmlType::kQ4_K, f.bytes, rows, 256);
    for (int64_t i = 0; i < rows * 256; ++i) {
      const int64_t g = i / 32;
      const float scale = HalfToFloat(p.params[static_cast<size_t>(2 * g)]);
      const float minimum = HalfToFloat(p.params[static_cast<size_t>(2 * g + 1)]);
      const float bound = 1.001f * std::ldexp(15.0f * std::fabs(scale) + std::fabs(minimum), -11);
      ASSERT_NEAR(Element(p, i), f.values[static_cast<size_t>(i)], bound) << "element " << i;
    }
    return;
  }
  FAIL() << "no Q4_K blocks in tests/data/gguf/blocks.json";
}

TEST(GgufQ4Test, RowsAreUnpermutedAsTheExpansionUnpermutesThem) {
  // llama.cpp's q/k row permutation for 2 heads of 4 rows (UnpermuteGgufQk).
  constexpr int64_t kRows = 8, kCols = 64;
  const std::string bytes = RandomBlocks(true, kRows * kCols / 32, 7);
  const Planes p = Convert(GgmlType::kQ4_1, bytes, kRows, kCols, 2);
  const std::vector<float> want = Expected(GgmlType::kQ4_1, bytes, kRows, kCols, 2);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    ASSERT_EQ(Element(p, i), want[static_cast<size_t>(i)]) << "element " << i;
  }
}

TEST(GgufQ4Test, AScaleWhoseMinimumOverflowsFp16IsRefused) {
  // Q4_0's minimum is -8 d: for d = 10000 that is beyond fp16, so the planes cannot hold it.
  std::string bytes = RandomBlocks(false, 2, 9);
  const uint16_t big = FloatToHalf(10000.0f);
  std::memcpy(bytes.data() + 18, &big, 2);  // the second block's d
  std::vector<uint8_t> codes(32);
  std::vector<uint16_t> params(4);
  EXPECT_FALSE(GgufQ4Planes(static_cast<uint32_t>(GgmlType::kQ4_0),
                            reinterpret_cast<const uint8_t*>(bytes.data()), 1, 64, 0, codes.data(),
                            params.data()));
}

TEST(GgufQ4Test, OnlyTheLinearFourBitTypesAreTaken) {
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K}) {
    EXPECT_TRUE(GgufHasQ4Blocks(static_cast<uint32_t>(type)));
  }
  // Five or more bits, or 4-bit codes on IQ4's non-linear grid: quantized like any other matrix.
  for (const GgmlType type : {GgmlType::kF16, GgmlType::kQ5_0, GgmlType::kQ5_K, GgmlType::kQ8_0,
                              GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    EXPECT_FALSE(GgufHasQ4Blocks(static_cast<uint32_t>(type)));
  }
}

}  // namespace
}  // namespace strata
