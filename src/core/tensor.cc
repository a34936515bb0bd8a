#include "src/core/tensor.h"

namespace strata {

size_t TensorView::bytes() const {
  const auto n = static_cast<size_t>(numel());
  if (dtype != DType::kQ4) return n * DTypeBytes(dtype);
  const int group = data != nullptr ? static_cast<const Q4Planes*>(data)->group : 64;
  return n / 2 + n / static_cast<size_t>(group) * 2 * sizeof(uint16_t);
}

std::string TensorView::Describe() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "] " + DTypeName(dtype);
}

}  // namespace strata
