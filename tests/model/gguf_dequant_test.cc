#include "src/model/gguf_dequant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/model/gguf.h"
#include "tests/model/gguf_blocks.h"
#include "tests/model/model_files.h"

namespace strata {
namespace {

using testing_files::Append;
using testing_files::BlockFixture;
using testing_files::ReadBlockFixtures;

// Dequantizes `bytes` of `type` holding `n` elements.
std::vector<float> Expand(GgmlType type, const std::string& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const Status s = DequantizeGguf(static_cast<uint32_t>(type),
                                  reinterpret_cast<const uint8_t*>(bytes.data()), n, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(GgufDequantTest, Q4_0) {
  // d = 0.5; byte j holds element j in its low nibble and element j+16 in its high nibble.
  std::string block;
  Append<uint16_t>(&block, FloatToHalf(0.5f));
  for (int j = 0; j < 16; ++j) block += static_cast<char>((15 - j) << 4 | j);
  const std::vector<float> y = Expand(GgmlType::kQ4_0, block, 32);
  EXPECT_EQ(y[0], -4.0f);   // 0.5 * (0 - 8)
  EXPECT_EQ(y[8], 0.0f);    // 0.5 * (8 - 8)
  EXPECT_EQ(y[15], 3.5f);   // 0.5 * (15 - 8)
  EXPECT_EQ(y[16], 3.5f);   // high nibble of byte 0 is 15
  EXPECT_EQ(y[31], -4.0f);  // high nibble of byte 15 is 0
  EXPECT_EQ(y[20], 1.5f);   // high nibble of byte 4 is 11: 0.5 * 3
}

TEST(GgufDequantTest, Q4_1) {
  std::string block;
  Append<uint16_t>(&block, FloatToHalf(0.25f));
  Append<uint16_t>(&block, FloatToHalf(-1.0f));
  for (int j = 0; j < 16; ++j) block += static_cast<char>((j % 4) << 4 | (15 - j));
  const std::vector<float> y = Expand(GgmlType::kQ4_1, block, 32);
  EXPECT_EQ(y[0], 2.75f);    // 0.25 * 15 - 1
  EXPECT_EQ(y[15], -1.0f);   // 0.25 * 0 - 1
  EXPECT_EQ(y[16], -1.0f);   // high nibble 0
  EXPECT_EQ(y[19], -0.25f);  // high nibble 3: 0.75 - 1
  EXPECT_EQ(y[10], 0.25f);   // 0.25 * 5 - 1
}

TEST(GgufDequantTest, Q8_0TwoBlocks) {
  std::string blocks;
  for (float d : {0.125f, -2.0f}) {
    Append<uint16_t>(&blocks, FloatToHalf(d));
    for (int j = 0; j < 32; ++j) blocks += static_cast<char>(static_cast<int8_t>(j * 8 - 128));
  }
  const std::vector<float> y = Expand(GgmlType::kQ8_0, blocks, 64);
  EXPECT_EQ(y[0], -16.0f);   // 0.125 * -128
  EXPECT_EQ(y[31], 15.0f);   // 0.125 * 120
  EXPECT_EQ(y[32], 256.0f);  // -2 * -128
  EXPECT_EQ(y[63], -240.0f);
}

TEST(GgufDequantTest, LargeTensorUsesEveryBlock) {
  // Enough blocks to take the parallel path; block b has d = b % 7 + 1 and q = 1.
  const int64_t blocks = 20000;
  std::string data;
  for (int64_t b = 0; b < blocks; ++b) {
    Append<uint16_t>(&data, FloatToHalf(static_cast<float>(b % 7 + 1)));
    data.append(32, '\x01');
  }
  const std::vector<float> y = Expand(GgmlType::kQ8_0, data, blocks * 32);
  for (int64_t b = 0; b < blocks; b += 997) {
    EXPECT_EQ(y[static_cast<size_t>(b * 32 + 5)], static_cast<float>(b % 7 + 1));
  }
  EXPECT_EQ(y.back(), static_cast<float>((blocks - 1) % 7 + 1));
}

TEST(GgufDequantTest, HalvesAndUnsupported) {
  const std::vector<float> v = {1.5f, -0.25f, 65504.0f, 0.0f};
  EXPECT_EQ(Expand(GgmlType::kF16, testing_files::F16Bytes(v), 4), v);
  EXPECT_EQ(Expand(GgmlType::kBF16, testing_files::Bf16Bytes({1.5f, -0.25f, 256.0f}), 3),
            (std::vector<float>{1.5f, -0.25f, 256.0f}));
  EXPECT_TRUE(GgufCanDequantize(3));
  EXPECT_TRUE(GgufCanDequantize(12));
  EXPECT_FALSE(GgufCanDequantize(15));  // Q8_K
  EXPECT_FALSE(GgufCanDequantize(16));  // IQ2_XXS
  float out[256];
  const uint8_t in[66] = {};
  const Status s = DequantizeGguf(16, in, 256, out);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos);
  EXPECT_NE(s.message().find("Q4_K"), std::string::npos);  // what it can read instead
}

TEST(GgufDequantTest, BlocksMatchGgufPy) {
  const std::vector<BlockFixture> fixtures = ReadBlockFixtures();
  std::vector<std::string> names;
  for (const BlockFixture& f : fixtures) {
    names.push_back(f.name);
    ASSERT_TRUE(GgufCanDequantize(f.type)) << f.name;
    const GgmlTypeTraits* traits = GgmlTypeInfo(f.type);
    ASSERT_NE(traits, nullptr);
    ASSERT_EQ(traits->block_size, f.block_size) << f.name;
    const int64_t n = static_cast<int64_t>(f.values.size());
    ASSERT_EQ(static_cast<int64_t>(f.bytes.size()), n / f.block_size * traits->type_bytes)
        << f.name;
    const std::vector<float> y = Expand(static_cast<GgmlType>(f.type), f.bytes, n);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y[static_cast<size_t>(i)] != f.values[static_cast<size_t>(i)] && ++mismatches <= 3) {
        ADD_FAILURE() << f.name << " element " << i << ": " << y[static_cast<size_t>(i)]
                      << ", gguf-py " << f.values[static_cast<size_t>(i)];
      }
    }
    EXPECT_EQ(mismatches, 0) << f.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"IQ4_NL", "IQ4_XS", "Q2_K", "Q3_K", "Q4_K", "Q5_0",
                                             "Q5_1", "Q5_K", "Q6_K"}));
}

TEST(GgufDequantTest, LargeKQuantTensorUsesEveryBlock) {
  // The fixture's Q4_K blocks repeated past the parallel threshold: every copy expands the same.
  for (const BlockFixture& f : ReadBlockFixtures()) {
    if (f.name != "Q4_K") continue;
    const int copies = 700;
    std::string data;
    for (int c = 0; c < copies; ++c) data += f.bytes;
    const int64_t n = static_cast<int64_t>(f.values.size());
    const std::vector<float> y = Expand(GgmlType::kQ4_K, data, copies * n);
    for (int c = 0; c < copies; c += 37) {
      EXPECT_TRUE(std::equal(f.values.begin(), f.values.end(), y.begin() + c * n)) << "copy " << c;
    }
    EXPECT_TRUE(std::equal(f.values.begin(), f.values.end(), y.end() - n));
  }
}

// llama.cpp's convert_hf_to_gguf.py permute: w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2).
std::vector<float> LlamaCppPermute(const std::vector<float>& w, int64_t n_head, int64_t hd,
                                   int64_t in) {
  std::vector<float> out(w.size());
  // out[h][i][j][c] = w[h][j][i][c], both flattened row-major.
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < in; ++c)
          out[((h * (hd / 2) + i) * 2 + j) * in + c] = w[((h * 2 + j) * (hd / 2) + i) * in + c];
  return out;
}

TEST(GgufUnpermuteTest, InvertsLlamaCppPermute) {
  for (auto [n_head, hd, in] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 8, 5}, {9, 64, 4}, {1, 2, 1}}) {
    std::vector<float> hf(static_cast<size_t>(n_head * hd * in));
    for (size_t k = 0; k < hf.size(); ++k) hf[k] = static_cast<float>(k);
    const std::vector<float> gguf = LlamaCppPermute(hf, n_head, hd, in);
    if (hd > 2) {
      EXPECT_NE(gguf, hf);
    }
    std::vector<float> back(hf.size());
    UnpermuteGgufQk(gguf.data(), n_head * hd, in, n_head, back.data());
    EXPECT_EQ(back, hf) << n_head << " heads of " << hd;
  }
}

}  // namespace
}  // namespace strata
