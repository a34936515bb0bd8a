// Element types of dense tensors, and the scalar conversions between them. Quantized file formats
// (GGUF Q4_1 and friends) are expanded by their readers into one of these.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace strata {

enum class DType : uint8_t { kF32, kF16, kBF16 };

constexpr size_t DTypeBytes(DType t) { return t == DType::kF32 ? 4 : 2; }
const char* DTypeName(DType t);
// "F32"/"F16"/"BF16" (safetensors spelling) to DType; nullopt for anything else.
std::optional<DType> DTypeFromName(std::string_view name);

// IEEE half to float, exact for every input including subnormals, inf and NaN.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Float to IEEE half, round to nearest even, overflow to inf.
uint16_t FloatToHalf(float f);

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Converts n elements of type `t` at `src` to float.
void ConvertToFloat(DType t, const void* src, float* dst, size_t n);

}  // namespace strata
