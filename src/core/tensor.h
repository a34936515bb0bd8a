// TensorView: a non-owning, row-major view of dense data (or of 4-bit planes, DType::kQ4). Weights
// are views into memory-mapped files or into buffers their loader owns; the view never frees
// anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/dtype.h"

namespace strata {

// The 4-bit planes of a matrix [rows, cols] in kernels/cpu/weight_q4.h's layout: codes
// [rows, cols / 2] bytes and params [rows, cols / group, 2] fp16 bits {scale, minimum}.
struct Q4Planes {
  const uint8_t* codes = nullptr;
  const uint16_t* params = nullptr;
  int group = 64;  // elements per group along a row: 64 (FlexGen's) or 32 (a GGUF's Q4 blocks)
};

struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first; a Linear weight is [out_features, in_features]
  const void* data = nullptr;  // nullptr means "absent" (e.g. a model without biases); for
                               // kQ4, a Q4Planes owned with the planes

  bool present() const { return data != nullptr; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // The bytes of its data; for kQ4, its codes and params together.
  size_t bytes() const;
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i)); }
  // "[49152, 576] F32", for messages.
  std::string Describe() const;
};

}  // namespace strata
