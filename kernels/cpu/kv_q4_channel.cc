#include "kernels/cpu/kv_q4_channel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/half.h"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::cpu {

namespace {

// Byte and nibble shift of channel c within a token's codes (the per-token nibble order).
struct Nibble {
  int byte;
  int shift;
};
Nibble NibbleOf(int c, int head_dim) {
  const int i = c / kQ4MaxGroup, j = c % kQ4MaxGroup;  // group i, its element j
  const int half = Q4GroupSize(head_dim, i) / 2;
  return {i * kQ4MaxGroup / 2 + j % half, j < half ? 0 : 4};
}

}  // namespace

void QuantizeKeyGroupByChannel(const float* const* keys, int head_dim, uint8_t* codes,
                               uint16_t* params) {
  constexpr int kC = kQ4ChannelGroup;
  const int row_bytes = Q4CodeBytes(head_dim);
  std::memset(codes, 0, static_cast<size_t>(kC) * row_bytes);
  for (int c = 0; c < head_dim; ++c) {
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < kC; ++j) {
      if (keys[j] == nullptr) continue;
      lo = std::min(lo, keys[j][c]);
      hi = std::max(hi, keys[j][c]);
    }
    if (lo > hi) lo = hi = 0.0f;  // nothing fitted
    const uint16_t scale_bits = FloatToHalfBits((hi - lo) / 15.0f);
    const uint16_t min_bits = FloatToHalfBits(lo);
    params[2 * c] = scale_bits;
    params[2 * c + 1] = min_bits;
    const float scale = HalfBitsToFloat(scale_bits);
    const float minimum = HalfBitsToFloat(min_bits);
    if (scale == 0.0f) continue;
    const Nibble n = NibbleOf(c, head_dim);
    for (int j = 0; j < kC; ++j) {
      if (keys[j] == nullptr) continue;
      const float q = std::clamp(std::nearbyint((keys[j][c] - minimum) / scale), 0.0f, 15.0f);
      codes[j * row_bytes + n.byte] |= static_cast<uint8_t>(static_cast<int>(q) << n.shift);
    }
  }
  std::fill(params + 2 * head_dim, params + kC * Q4ChannelParamHalves(head_dim), uint16_t{0});
}

void DequantizeKeyByChannel(const uint8_t* codes, const uint16_t* group_params, int head_dim,
                            float* x) {
  for (int c = 0; c < head_dim; ++c) {
    const Nibble n = NibbleOf(c, head_dim);
    const int q = (codes[n.byte] >> n.shift) & 0xF;
    x[c] = static_cast<float>(q) * HalfBitsToFloat(group_params[2 * c]) +
           HalfBitsToFloat(group_params[2 * c + 1]);
  }
}

void WriteKeyGroupsByChannel(int head_dim, int sink, int window, int start, int first_slot,
                             int tokens, const float* new_keys, long new_stride,
                             const float* exact_keys, uint8_t* codes, uint16_t* params) {
  constexpr int kC = kQ4ChannelGroup;
  const int first_token = first_slot - start;
  const int end_token = first_token + tokens;
  const float* keys[kC];
  for (int g = std::max(0, first_token) / kC; (g + 1) * kC <= end_token; ++g) {
    for (int j = 0; j < kC; ++j) {
      const int token = g * kC + j;
      const int slot = start + token;
      if (token < sink) {
        keys[j] = nullptr;
      } else if (slot >= first_slot) {
        keys[j] = new_keys + (slot - first_slot) * new_stride;
      } else {
        keys[j] = exact_keys + static_cast<long>(sink + token % window) * head_dim;
      }
    }
    const long slot0 = start + static_cast<long>(g) * kC;
    QuantizeKeyGroupByChannel(keys, head_dim, codes + slot0 * Q4CodeBytes(head_dim),
                              params + slot0 * Q4ChannelParamHalves(head_dim));
  }
}

}  // namespace strata::kernels::cpu
