#include "src/model/gguf_q4.h"

#include <cmath>
#include <cstring>

#include "src/core/check.h"
#include "src/core/dtype.h"
#include "src/model/gguf.h"
#include "src/model/gguf_dequant.h"

namespace strata {
namespace {

uint16_t LoadBits(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// *out = x as fp16; false when a finite x overflows it.
bool ToHalf(float x, uint16_t* out) {
  *out = FloatToHalf(x);
  return !std::isfinite(x) || std::isfinite(HalfToFloat(*out));
}

// Q4_0 (18 bytes: d, 16 code bytes) and Q4_1 (20 bytes: d, m, 16 code bytes) hold one group each,
// their code bytes already in the planes' order.
bool Q4_0Row(const uint8_t* b, int64_t blocks, uint8_t* codes, uint16_t* params) {
  bool fits = true;
  for (int64_t i = 0; i < blocks; ++i, b += 18) {
    const uint16_t d = LoadBits(b);
    params[2 * i] = d;
    fits &= ToHalf(-8.0f * HalfToFloat(d), &params[2 * i + 1]);
    std::memcpy(codes + 16 * i, b + 2, 16);
  }
  return fits;
}

bool Q4_1Row(const uint8_t* b, int64_t blocks, uint8_t* codes, uint16_t* params) {
  for (int64_t i = 0; i < blocks; ++i, b += 20) {
    params[2 * i] = LoadBits(b);
    params[2 * i + 1] = LoadBits(b + 2);
    std::memcpy(codes + 16 * i, b + 4, 16);
  }
  return true;
}

// Q4_K (144 bytes: d, dmin, 12 bytes of sub-block scales and minima, 128 code bytes): 8 groups.
// Code byte l of pass p holds element l of sub-block 2p (low nibble) and of 2p + 1 (high).
bool Q4_KRow(const uint8_t* b, int64_t blocks, uint8_t* codes, uint16_t* params) {
  bool fits = true;
  for (int64_t i = 0; i < blocks; ++i, b += 144) {
    const float d = HalfToFloat(LoadBits(b)), dmin = HalfToFloat(LoadBits(b + 2));
    for (int s = 0; s < 8; ++s) {
      int scale = 0, min = 0;
      GgufScaleMinK4(s, b + 4, &scale, &min);
      uint16_t* p = params + 2 * (8 * i + s);
      fits &= ToHalf(d * static_cast<float>(scale), &p[0]);
      fits &= ToHalf(-(dmin * static_cast<float>(min)), &p[1]);
      const uint8_t* q = b + 16 + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      uint8_t* c = codes + 16 * (8 * i + s);
      for (int j = 0; j < 16; ++j) {
        c[j] = static_cast<uint8_t>(((q[j] >> shift) & 0x0F) | ((q[j + 16] >> shift) & 0x0F) << 4);
      }
    }
  }
  return fits;
}

}  // namespace

bool GgufHasQ4Blocks(uint32_t type) {
  return type == static_cast<uint32_t>(GgmlType::kQ4_0) ||
         type == static_cast<uint32_t>(GgmlType::kQ4_1) ||
         type == static_cast<uint32_t>(GgmlType::kQ4_K);
}

bool GgufQ4Planes(uint32_t type, const uint8_t* src, int64_t rows, int64_t cols,
                  int unpermute_heads, uint8_t* codes, uint16_t* params) {
  STRATA_CHECK(GgufHasQ4Blocks(type));
  const GgmlTypeTraits& traits = *GgmlTypeInfo(type);
  const int64_t blocks = cols / traits.block_size, row_bytes = blocks * traits.type_bytes;
  const auto convert = type == static_cast<uint32_t>(GgmlType::kQ4_0)   ? Q4_0Row
                       : type == static_cast<uint32_t>(GgmlType::kQ4_1) ? Q4_1Row
                                                                        : Q4_KRow;
  const int64_t head_dim = unpermute_heads > 0 ? rows / unpermute_heads : 0;
  bool fits = true;
#pragma omp parallel for schedule(static) reduction(&& : fits)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t from = r;
    if (head_dim > 0) {
      const int64_t half = head_dim / 2, h = r / head_dim, j = (r % head_dim) / half, i = r % half;
      from = h * head_dim + 2 * i + j;
    }
    fits = convert(src + from * row_bytes, blocks, codes + r * (cols / 2),
                   params + r * (cols / 32) * 2) &&
           fits;
  }
  return fits;
}

}  // namespace strata
