// Element types of tensors, and the scalar conversions between the dense ones. Quantized file
// formats (GGUF Q4_1 and friends) are expanded by their readers into a dense type; the one
// exception is kQ4 below.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace strata {

// kQ4 is not dense: a matrix in 4-bit group-wise planes (kernels/cpu/weight_q4.h's layout, groups
// of Q4Planes::group along a row), as a strata store written by `strata convert --compress-weight`
// holds it. A kQ4 view's data points at a Q4Planes (src/core/tensor.h). The offloading engine
// moves the planes and expands them once per layer; a backend given a kQ4 weight expands one
// matrix (or, for an embedding, the rows it looks up) at a time.
enum class DType : uint8_t { kF32, kF16, kBF16, kQ4 };

// Bytes per element of a dense type. REQUIRES: t != kQ4 (TensorView::bytes() sizes those).
size_t DTypeBytes(DType t);
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

// Float to bfloat16, round to nearest even; NaN stays NaN.
uint16_t FloatToBf16(float f);

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Converts n elements of type `t` at `src` to float. REQUIRES: t != kQ4.
void ConvertToFloat(DType t, const void* src, float* dst, size_t n);
// Rounds n floats to type `t` at `dst` (to nearest even). REQUIRES: t != kQ4.
void ConvertFromFloat(DType t, const float* src, void* dst, size_t n);

}  // namespace strata
