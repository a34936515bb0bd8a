// Host references for the 4-bit KV cache tests, written from kernels/kv_q4_format.h alone: the
// quantizer (with the optional Walsh–Hadamard rotation, in the butterfly order of
// kernels/cpu/hadamard.cc) and the reader. They use the same fp32 operations as the format
// prescribes, so the device writer must match them bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/kv_q4_format.h"
#include "src/core/dtype.h"

namespace strata::testing {

inline void RefHadamard(float* v, int dim) {
  for (int len = 1; len < dim; len <<= 1) {
    for (int i = 0; i < dim; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        const float a = v[j];
        const float b = v[j + len];
        v[j] = a + b;
        v[j + len] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(dim));
  for (int i = 0; i < dim; ++i) v[i] *= norm;
}

// One head vector x[head_dim] into codes[head_dim / 2] and params[head_dim / G * 2] (fp16 bits).
inline void RefQuantizeRow(const float* x, int head_dim, uint8_t* codes, uint16_t* params) {
  const int g = kernels::Q4Group(head_dim);
  const int half = g / 2;
  for (int gi = 0; gi < head_dim / g; ++gi) {
    const float* xg = x + gi * g;
    float lo = xg[0], hi = xg[0];
    for (int i = 1; i < g; ++i) {
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    const uint16_t scale_bits = FloatToHalf((hi - lo) / 15.0f);
    const uint16_t min_bits = FloatToHalf(lo);
    const float scale = HalfToFloat(scale_bits);
    const float minimum = HalfToFloat(min_bits);
    params[2 * gi] = scale_bits;
    params[2 * gi + 1] = min_bits;
    for (int j = 0; j < half; ++j) {
      int q[2] = {0, 0};
      if (scale != 0.0f) {
        for (int k = 0; k < 2; ++k) {
          const float c = std::nearbyint((xg[j + k * half] - minimum) / scale);
          q[k] = static_cast<int>(std::clamp(c, 0.0f, 15.0f));
        }
      }
      codes[gi * half + j] = static_cast<uint8_t>(q[0] | (q[1] << 4));
    }
  }
}

inline void RefDequantizeRow(const uint8_t* codes, const uint16_t* params, int head_dim, float* x) {
  const int g = kernels::Q4Group(head_dim);
  const int half = g / 2;
  for (int gi = 0; gi < head_dim / g; ++gi) {
    const float scale = HalfToFloat(params[2 * gi]);
    const float minimum = HalfToFloat(params[2 * gi + 1]);
    for (int j = 0; j < half; ++j) {
      const uint8_t b = codes[gi * half + j];
      const float lo = static_cast<float>(b & 0xF) * scale;
      const float hi = static_cast<float>(b >> 4) * scale;
      x[gi * g + j] = lo + minimum;
      x[gi * g + j + half] = hi + minimum;
    }
  }
}

}  // namespace strata::testing
