#include "src/core/dtype.h"

#include "src/core/check.h"

namespace strata {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ4:
      return "Q4";
  }
  return "?";
}

size_t DTypeBytes(DType t) {
  STRATA_CHECK(t != DType::kQ4);
  return t == DType::kF32 ? 4 : 2;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return std::nullopt;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u);
  if (abs >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65520: overflow
  if (abs < 0x38800000u) {                          // result is subnormal or zero
    if (abs < 0x33000000u) return sign;             // below half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (112 - e) + ... places the value in 10 mantissa bits
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

void ConvertFromFloat(DType t, const float* src, void* dst, size_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = FloatToBf16(src[i]);
      return;
    }
    case DType::kQ4:
      break;
  }
  STRATA_CHECK(t != DType::kQ4);
}

void ConvertToFloat(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(s[i]);
      return;
    }
    case DType::kQ4:
      break;
  }
  STRATA_CHECK(t != DType::kQ4);
}

}  // namespace strata
