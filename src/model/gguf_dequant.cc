#include "src/model/gguf_dequant.h"

#include <cstring>
#include <iterator>
#include <string>

#include "src/core/dtype.h"
#include "src/model/gguf.h"

namespace strata {
namespace {

constexpr int64_t kBlock = 32;  // elements of a Q4_0/Q8_0 block: the grain of the thresholds below
constexpr int64_t kParallelMinBlocks = 4096;  // below this, threads cost more than they save

inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

void BlockQ4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((q[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
  }
}

void BlockQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(q[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(q[j] >> 4) + m;
  }
}

void BlockQ8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int j = 0; j < 32; ++j) {
    int8_t q;
    std::memcpy(&q, b + 2 + j, 1);
    y[j] = d * static_cast<float>(q);
  }
}

// Q5_0 and Q5_1: the Q4 nibbles plus a fifth bit per element from the 32-bit word qh (bit j for
// element j); Q5_0 is centred on 16.
template <bool kMin>
void BlockQ5(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = kMin ? LoadHalf(b + 2) : 0.0f;
  uint32_t qh;
  std::memcpy(&qh, b + (kMin ? 4 : 2), 4);
  const uint8_t* q = b + (kMin ? 8 : 6);
  const int offset = kMin ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int lo = (q[j] & 0x0F) | static_cast<int>((qh >> j) << 4 & 0x10);
    const int hi = (q[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
    if (kMin) {
      y[j] = d * static_cast<float>(lo) + m;
      y[j + 16] = d * static_cast<float>(hi) + m;
    } else {
      y[j] = d * static_cast<float>(lo - offset);
      y[j + 16] = d * static_cast<float>(hi - offset);
    }
  }
}

// Q2_K: 16 sub-blocks of 16 elements, a byte of 4-bit scale (low) and 4-bit minimum (high) each;
// element values are 2-bit fields, four per byte of qs (32 bytes per 128 elements, shift 2 per
// 32 elements).
void BlockQ2_K(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = LoadHalf(b + 80), dmin = LoadHalf(b + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K: 16 sub-blocks of 16 elements with signed 6-bit scales (12 bytes: low nibbles in bytes
// 0-7, two high bits each in bytes 8-11), 2-bit low parts as in Q2_K and a high bit per element
// in hmask; a clear high bit subtracts 4.
void BlockQ3_K(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d = LoadHalf(b + 108);
  int scales[16];
  for (int i = 0; i < 16; ++i) {
    const int low = (packed[i % 8] >> (4 * (i / 8))) & 0x0F;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
    scales[i] = (low | high << 4) - 32;
  }
  int is = 0;
  uint8_t bit = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, bit = static_cast<uint8_t>(bit << 1)) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(scales[is++]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int value = ((q[l] >> shift) & 3) - ((hmask[l] & bit) != 0 ? 0 : 4);
          *y++ = dl * static_cast<float>(value);
        }
      }
    }
  }
}

// Q4_K (kHighBits false) and Q5_K: 8 sub-blocks of 32 elements with 6-bit scales and minima;
// 64 elements per 32 bytes of nibbles (low nibbles first); Q5_K adds a fifth bit per element
// from qh (bit 2k for the low nibbles of pass k, bit 2k + 1 for the high ones).
template <bool kHighBits>
void BlockQ45_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
  const uint8_t* packed = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + (kHighBits ? 48 : 16);
  for (int pass = 0; pass < 4; ++pass, q += 32) {
    for (int nibble = 0; nibble < 2; ++nibble) {
      int scale = 0, min = 0;
      GgufScaleMinK4(2 * pass + nibble, packed, &scale, &min);
      const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
      const uint8_t bit = static_cast<uint8_t>(1u << (2 * pass + nibble));
      for (int l = 0; l < 32; ++l) {
        int value = nibble == 0 ? q[l] & 0x0F : q[l] >> 4;
        if (kHighBits && (qh[l] & bit) != 0) value += 16;
        *y++ = dl * static_cast<float>(value) - ml;
      }
    }
  }
}

// Q6_K: 16 sub-blocks of 16 elements with signed 8-bit scales; 6-bit values centred on 32, their
// low nibbles in ql (64 bytes per 128 elements) and two high bits each in qh (32 bytes per 128).
void BlockQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const float d = LoadHalf(b + 208);
  int8_t sc[16];
  std::memcpy(sc, b + 192, 16);
  for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const int is = 8 * half + l / 16;
      const int q1 = ((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// The 16 values of IQ4_NL and IQ4_XS codes (ggml's kvalues_iq4nl): a non-linear 4-bit grid.
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// 32 elements at `q` (16 bytes: low nibbles first, then high) on the IQ4 grid, scaled by d.
void Iq4Elements(const uint8_t* q, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Values[q[j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kIq4Values[q[j] >> 4]);
  }
}

// IQ4_NL: fp16 d and 16 bytes of IQ4 codes.
void BlockIq4Nl(const uint8_t* b, float* y) { Iq4Elements(b + 2, LoadHalf(b), y); }

// IQ4_XS: fp16 d, then 8 sub-blocks of 32 elements with signed 6-bit scales (low nibbles in
// 4 bytes of scales_l, two high bits each in the 16-bit scales_h), then 128 bytes of IQ4 codes.
void BlockIq4Xs(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* q = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
    const int high = (scales_h >> (2 * ib)) & 3;
    Iq4Elements(q + 16 * ib, d * static_cast<float>((low | high << 4) - 32), y + 32 * ib);
  }
}

// Expands `n` elements of a type whose layout is `t` (GgmlTypeInfo) from `src` into `dst`.
using Expander = void (*)(const uint8_t* src, int64_t n, float* dst, const GgmlTypeTraits& t);

// Block types: kBlockFn expands one block of t.block_size elements stored in t.type_bytes.
template <void (*kBlockFn)(const uint8_t*, float*)>
void ExpandBlocks(const uint8_t* src, int64_t n, float* dst, const GgmlTypeTraits& t) {
  const int64_t elements = t.block_size, bytes = t.type_bytes, blocks = n / elements;
#pragma omp parallel for schedule(static) if (n >= kParallelMinBlocks * kBlock)
  for (int64_t i = 0; i < blocks; ++i) kBlockFn(src + i * bytes, dst + i * elements);
}

// F16/BF16 in chunks of whole blocks of kBlock elements plus a serial tail.
template <float (*kConvert)(uint16_t)>
void ExpandHalves(const uint8_t* src, int64_t n, float* dst, const GgmlTypeTraits&) {
  const int64_t blocks = n / kBlock;
#pragma omp parallel for schedule(static) if (blocks >= kParallelMinBlocks)
  for (int64_t i = 0; i < blocks; ++i) {
    for (int64_t j = i * kBlock; j < (i + 1) * kBlock; ++j) {
      uint16_t h;
      std::memcpy(&h, src + 2 * j, 2);
      dst[j] = kConvert(h);
    }
  }
  for (int64_t j = blocks * kBlock; j < n; ++j) {
    uint16_t h;
    std::memcpy(&h, src + 2 * j, 2);
    dst[j] = kConvert(h);
  }
}

void CopyF32(const uint8_t* src, int64_t n, float* dst, const GgmlTypeTraits&) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}

// The types strata expands, each with its expander; the only list of them.
struct Expandable {
  GgmlType type;
  Expander expand;
};
constexpr Expandable kExpandable[] = {
    {GgmlType::kF32, CopyF32},
    {GgmlType::kF16, ExpandHalves<HalfToFloat>},
    {GgmlType::kBF16, ExpandHalves<Bf16ToFloat>},
    {GgmlType::kQ4_0, ExpandBlocks<BlockQ4_0>},
    {GgmlType::kQ4_1, ExpandBlocks<BlockQ4_1>},
    {GgmlType::kQ5_0, ExpandBlocks<BlockQ5<false>>},
    {GgmlType::kQ5_1, ExpandBlocks<BlockQ5<true>>},
    {GgmlType::kQ8_0, ExpandBlocks<BlockQ8_0>},
    {GgmlType::kQ2_K, ExpandBlocks<BlockQ2_K>},
    {GgmlType::kQ3_K, ExpandBlocks<BlockQ3_K>},
    {GgmlType::kQ4_K, ExpandBlocks<BlockQ45_K<false>>},
    {GgmlType::kQ5_K, ExpandBlocks<BlockQ45_K<true>>},
    {GgmlType::kQ6_K, ExpandBlocks<BlockQ6_K>},
    {GgmlType::kIQ4_NL, ExpandBlocks<BlockIq4Nl>},
    {GgmlType::kIQ4_XS, ExpandBlocks<BlockIq4Xs>},
};

const Expandable* FindExpandable(uint32_t type) {
  for (const Expandable& e : kExpandable) {
    if (static_cast<uint32_t>(e.type) == type) return &e;
  }
  return nullptr;
}

}  // namespace

void GgufScaleMinK4(int j, const uint8_t* packed, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0F) | (packed[j - 4] >> 6) << 4;
    *min = (packed[j + 4] >> 4) | (packed[j] >> 6) << 4;
  }
}

bool GgufCanDequantize(uint32_t type) { return FindExpandable(type) != nullptr; }

std::string GgufDequantizableTypes() {
  std::string names;
  const size_t count = std::size(kExpandable);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) names += i + 1 < count ? ", " : " and ";
    names += GgmlTypeName(static_cast<uint32_t>(kExpandable[i].type));
  }
  return names;
}

Status DequantizeGguf(uint32_t type, const uint8_t* src, int64_t n, float* dst) {
  const Expandable* e = FindExpandable(type);
  if (e == nullptr) {
    return Status::Unsupported("ggml type " + GgmlTypeName(type) +
                               " cannot be expanded (strata reads " + GgufDequantizableTypes() +
                               "); re-quantize the model to one of these");
  }
  e->expand(src, n, dst, *GgmlTypeInfo(type));
  return Status::Ok();
}

Status ExpandGgufTensor(uint32_t type, const uint8_t* src, const std::vector<int64_t>& shape,
                        int unpermute_heads, float* dst) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (unpermute_heads == 0) return DequantizeGguf(type, src, n, dst);
  std::vector<float> tmp(static_cast<size_t>(n));
  STRATA_RETURN_IF_ERROR(DequantizeGguf(type, src, n, tmp.data()));
  UnpermuteGgufQk(tmp.data(), shape[0], shape[1], unpermute_heads, dst);
  return Status::Ok();
}

void UnpermuteGgufQk(const float* src, int64_t rows, int64_t cols, int64_t n_head, float* dst) {
  const int64_t head_dim = rows / n_head, half = head_dim / 2;
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMinBlocks * kBlock)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head_dim, j = (r % head_dim) / half, i = r % half;
    std::memcpy(dst + r * cols, src + (h * head_dim + 2 * i + j) * cols, row_bytes);
  }
}

}  // namespace strata
