#include "src/io/checksum.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata {
namespace {

uint64_t Of(const std::string& s) { return Checksum64(s.data(), s.size()); }

// Published XXH64 (seed 0) values: the empty input, short inputs (tail paths only) and one of 39
// bytes (the 32-byte stripe loop, then an 8-byte word, a 4-byte word and 3 single bytes).
TEST(Checksum64Test, MatchesPublishedXxh64Values) {
  EXPECT_EQ(Of(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(Of("a"), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(Of("abc"), 0x44BC2CF5AD770999ull);
  EXPECT_EQ(Of("Nobody inspects the spammish repetition"), 0xFBCEA83C8A378BF1ull);
}

TEST(Checksum64Test, EveryByteMatters) {
  std::vector<uint8_t> data(4096 + 13);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  const uint64_t base = Checksum64(data.data(), data.size());
  for (size_t i : {size_t{0}, size_t{31}, size_t{32}, size_t{4095}, data.size() - 1}) {
    data[i] ^= 1;
    EXPECT_NE(Checksum64(data.data(), data.size()), base) << "byte " << i;
    data[i] ^= 1;
  }
  EXPECT_NE(Checksum64(data.data(), data.size() - 1), base);
}

}  // namespace
}  // namespace strata
