// 4-bit group-wise weights (`--compress-weight`): each row of a Linear weight [out, in] is cut
// into groups of G consecutive input elements (G = kWeightQ4Group, FlexGen's 64, or 32: the
// blocks of a GGUF file's Q4_0, Q4_1 and Q4_K matrices, kept as they are), each quantized exactly
// like a group of the 4-bit KV cache (kernels/kv_q4_format.h: fp16 scale and minimum rounded
// before the codes, max == min guarded). Byte j of a group holds element j in its low nibble and
// element j + G / 2 in its high one (at G = 32, Q4_0's and Q4_1's own order). Planes:
//   codes  [rows, cols / 2] bytes
//   params [rows, cols / G, 2] fp16 bits {scale, minimum}; element = code * scale + minimum
// The runtime keeps weights in this form and expands a layer to fp32 once per layer per block,
// shared by every micro-batch of the block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cpu {

inline constexpr int kWeightQ4Group = 64;

enum class WeightQ4Source { kF32, kF16, kBF16 };

constexpr size_t WeightQ4CodeBytes(long rows, long cols) {
  return static_cast<size_t>(rows) * static_cast<size_t>(cols) / 2;
}
constexpr size_t WeightQ4ParamHalves(long rows, long cols, int group) {
  return static_cast<size_t>(rows) * static_cast<size_t>(cols / group) * 2;
}
// Whether a weight with `cols` input elements can be stored in 4 bits in groups of `group`.
constexpr bool WeightQ4Supports(long cols, int group) { return cols > 0 && cols % group == 0; }

// Quantizes w[rows, cols] of element type `type` into the planes of `group`. Parallel over rows
// (OpenMP). REQUIRES: group 32 or 64; WeightQ4Supports(cols, group); w finite.
void QuantizeWeightQ4(WeightQ4Source type, const void* w, long rows, long cols, int group,
                      uint8_t* codes, uint16_t* params);

// out[rows, cols] = code * float(scale) + float(minimum), in fp32. Parallel over rows (OpenMP),
// vectorised for the running CPU. REQUIRES: as QuantizeWeightQ4.
void ExpandWeightQ4(const uint8_t* codes, const uint16_t* params, long rows, long cols, int group,
                    float* out);

}  // namespace strata::kernels::cpu
