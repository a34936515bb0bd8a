#include "src/core/tensor.h"

namespace strata {

std::string TensorView::Describe() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "] " + DTypeName(dtype);
}

}  // namespace strata
