// 4-bit weights on the host, where a model is loaded or converted (never in the token loop): a
// matrix quantized into the format the backends read (q4_sizes.h's sizes), and expanded back to
// fp32 as the backends' ExpandWeightQ4 expands it, bit for bit.
#pragma once

#include <cstdint>

#include "src/core/dtype.h"

namespace strata {

// codes and params of the [rows, cols] matrix at `data`, of F32, F16 or BF16 elements, in groups
// of `group` columns. REQUIRES: WeightQ4Supports(cols, group); codes and params hold
// WeightQ4CodeBytes(rows, cols) bytes and WeightQ4ParamHalves(rows, cols, group) values.
void QuantizeWeightQ4OnHost(DType dtype, const void* data, int64_t rows, int64_t cols, int group,
                            uint8_t* codes, uint16_t* params);
// out[rows, cols] = the matrix of `codes` and `params` in fp32.
void ExpandWeightQ4OnHost(const uint8_t* codes, const uint16_t* params, int64_t rows,
                          int64_t cols, int group, float* out);

}  // namespace strata
