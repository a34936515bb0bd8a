#include "src/backend/weight_q4_host.h"

#include "kernels/cpu/weight_q4.h"
#include "src/core/check.h"

namespace strata {

void QuantizeWeightQ4OnHost(DType dtype, const void* data, int64_t rows, int64_t cols, int group,
                            uint8_t* codes, uint16_t* params) {
  using kernels::cpu::WeightQ4Source;
  STRATA_CHECK_MSG(dtype != DType::kQ4,
                   "4-bit planes are used as they are, never quantized again");
  const WeightQ4Source source = dtype == DType::kF16    ? WeightQ4Source::kF16
                                : dtype == DType::kBF16 ? WeightQ4Source::kBF16
                                                        : WeightQ4Source::kF32;
  kernels::cpu::QuantizeWeightQ4(source, data, static_cast<long>(rows), static_cast<long>(cols),
                                 group, codes, params);
}

void ExpandWeightQ4OnHost(const uint8_t* codes, const uint16_t* params, int64_t rows,
                          int64_t cols, int group, float* out) {
  kernels::cpu::ExpandWeightQ4(codes, params, static_cast<long>(rows), static_cast<long>(cols),
                               group, out);
}

}  // namespace strata
