#include "kernels/cpu/kv_q4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/half.h"

namespace strata::kernels::cpu {

void QuantizeQ4Group(const float* x, int g, uint8_t* codes, uint16_t* params) {
  float lo = x[0];
  float hi = x[0];
  for (int i = 1; i < g; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const uint16_t scale_bits = FloatToHalfBits((hi - lo) / 15.0f);
  const uint16_t min_bits = FloatToHalfBits(lo);
  const float scale = HalfBitsToFloat(scale_bits);
  const float minimum = HalfBitsToFloat(min_bits);
  params[0] = scale_bits;
  params[1] = min_bits;
  const int half = g / 2;
  for (int j = 0; j < half; ++j) {
    int q[2] = {0, 0};
    if (scale != 0.0f) {
      for (int k = 0; k < 2; ++k) {
        const float c = std::nearbyint((x[j + k * half] - minimum) / scale);
        q[k] = static_cast<int>(std::clamp(c, 0.0f, 15.0f));
      }
    }
    codes[j] = static_cast<uint8_t>(q[0] | (q[1] << 4));
  }
}

void QuantizeQ4Row(const float* x, int head_dim, uint8_t* codes, uint16_t* params) {
  for (int i = 0; i < Q4Groups(head_dim); ++i) {
    QuantizeQ4Group(x + i * kQ4MaxGroup, Q4GroupSize(head_dim, i), codes + i * kQ4MaxGroup / 2,
                    params + 2 * i);
  }
}

void DequantizeQ4Row(const uint8_t* codes, const uint16_t* params, int head_dim, float* x) {
  for (int i = 0; i < Q4Groups(head_dim); ++i) {
    const int half = Q4GroupSize(head_dim, i) / 2;
    const float scale = HalfBitsToFloat(params[2 * i]);
    const float minimum = HalfBitsToFloat(params[2 * i + 1]);
    const uint8_t* c = codes + i * kQ4MaxGroup / 2;
    float* y = x + i * kQ4MaxGroup;
    for (int j = 0; j < half; ++j) {
      y[j] = static_cast<float>(c[j] & 0xF) * scale + minimum;
      y[j + half] = static_cast<float>(c[j] >> 4) * scale + minimum;
    }
  }
}

void WriteQ4Cache(const Q4CacheShape& s, const float* rows, int tokens, int first_slot, bool rotate,
                  uint8_t* codes, uint16_t* params) {
  const int d = s.head_dim;
  const long work = static_cast<long>(s.batch) * tokens * s.num_kv_heads;
#pragma omp parallel if (work > 64)
  {
    std::vector<float> rotated(rotate ? static_cast<size_t>(d) : 0);
#pragma omp for schedule(static)
    for (long w = 0; w < work; ++w) {
      const int h = static_cast<int>(w % s.num_kv_heads);
      const int t = static_cast<int>((w / s.num_kv_heads) % tokens);
      const int b = static_cast<int>(w / (static_cast<long>(s.num_kv_heads) * tokens));
      const float* src = rows + w * d;
      if (rotate) {
        std::memcpy(rotated.data(), src, sizeof(float) * d);
        HadamardRotate(rotated.data(), 1, d);
        src = rotated.data();
      }
      const long row = (static_cast<long>(b) * s.num_kv_heads + h) * s.max_len + first_slot + t;
      QuantizeQ4Row(src, d, codes + row * Q4CodeBytes(d), params + row * Q4ParamHalves(d));
    }
  }
}

}  // namespace strata::kernels::cpu
