#include "kernels/cpu/weight_q4.h"

#include <cstring>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/kv_q4.h"

namespace strata::kernels::cpu {
namespace {

void ToFloat(WeightQ4Source type, const void* src, long n, float* dst) {
  if (type == WeightQ4Source::kF32) {
    std::memcpy(dst, src, sizeof(float) * n);
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  for (long i = 0; i < n; ++i) {
    if (type == WeightQ4Source::kF16) {
      dst[i] = HalfBitsToFloat(s[i]);
    } else {
      const uint32_t bits = static_cast<uint32_t>(s[i]) << 16;
      std::memcpy(dst + i, &bits, 4);
    }
  }
}

// One row in groups of kGroup; cloned per instruction set (GCC picks the clone at load time) so
// the group loop vectorises to the widest registers the CPU has.
template <int kGroup>
__attribute__((target_clones("avx512f", "avx2", "default"))) void ExpandRow(const uint8_t* codes,
                                                                            const uint16_t* params,
                                                                            long cols, float* out) {
  constexpr int kHalf = kGroup / 2;
  for (long g = 0; g < cols / kGroup; ++g) {
    const float scale = HalfBitsToFloat(params[2 * g]);
    const float minimum = HalfBitsToFloat(params[2 * g + 1]);
    const uint8_t* c = codes + g * kHalf;
    float* y = out + g * kGroup;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(c[j] & 0xF) * scale + minimum;
      y[j + kHalf] = static_cast<float>(c[j] >> 4) * scale + minimum;
    }
  }
}

}  // namespace

void QuantizeWeightQ4(WeightQ4Source type, const void* w, long rows, long cols, int group,
                      uint8_t* codes, uint16_t* params) {
  const size_t elem = type == WeightQ4Source::kF32 ? 4 : 2;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (long r = 0; r < rows; ++r) {
      ToFloat(type, static_cast<const uint8_t*>(w) + r * cols * elem, cols, row.data());
      for (long g = 0; g < cols / group; ++g) {
        QuantizeQ4Group(row.data() + g * group, group, codes + (r * cols + g * group) / 2,
                        params + 2 * (r * (cols / group) + g));
      }
    }
  }
}

void ExpandWeightQ4(const uint8_t* codes, const uint16_t* params, long rows, long cols, int group,
                    float* out) {
  const auto row = group == 32 ? ExpandRow<32> : ExpandRow<64>;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    row(codes + r * cols / 2, params + 2 * r * (cols / group), cols, out + r * cols);
  }
}

}  // namespace strata::kernels::cpu
