// 4-bit group-wise weights (`--compress-weight`): each row of a Linear weight [out, in] is cut
// into groups of kWeightQ4Group consecutive input elements, each quantized exactly like a group
// of the 4-bit KV cache (kernels/kv_q4_format.h: fp16 scale and minimum rounded before the codes,
// max == min guarded, byte j of a group holds elements j and j + 32). Planes:
//   codes  [rows, cols / 2] bytes
//   params [rows, cols / kWeightQ4Group, 2] fp16 bits {scale, minimum}
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
constexpr size_t WeightQ4ParamHalves(long rows, long cols) {
  return static_cast<size_t>(rows) * static_cast<size_t>(cols / kWeightQ4Group) * 2;
}
// Whether a weight with `cols` input elements can be stored in 4 bits.
constexpr bool WeightQ4Supports(long cols) { return cols > 0 && cols % kWeightQ4Group == 0; }

// Quantizes w[rows, cols] of element type `type` into the planes. Parallel over rows (OpenMP).
// REQUIRES: WeightQ4Supports(cols); w finite.
void QuantizeWeightQ4(WeightQ4Source type, const void* w, long rows, long cols, uint8_t* codes,
                      uint16_t* params);

// out[rows, cols] = code * float(scale) + float(minimum), in fp32. Parallel over rows (OpenMP),
// vectorised for the running CPU.
void ExpandWeightQ4(const uint8_t* codes, const uint16_t* params, long rows, long cols, float* out);

}  // namespace strata::kernels::cpu
