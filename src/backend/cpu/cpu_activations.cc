#include "src/backend/cpu/cpu_activations.h"

#include "src/backend/cpu/cpu_memory.h"
#include "src/core/check.h"

namespace strata {

CpuActivations::CpuActivations(const DeviceSpan& span, int64_t n)
    : type_(span.type()), n_(n) {
  STRATA_CHECK_MSG(type_ == SpanType::kF32 || type_ == SpanType::kF16 ||
                       type_ == SpanType::kBF16,
                   "an activation span is not f32, f16 or bf16");
  dtype_ = type_ == SpanType::kF32 ? DType::kF32
           : type_ == SpanType::kF16 ? DType::kF16
                                     : DType::kBF16;
  STRATA_CHECK(n >= 0 && span.bytes() == static_cast<uint64_t>(n) * SpanElementBytes(type_));
  data_ = CpuAddress(span);
}

float* CpuActivations::Read(std::vector<float>& buf) const {
  if (type_ == SpanType::kF32) return reinterpret_cast<float*>(data_);
  buf.resize(static_cast<size_t>(n_));
  ConvertToFloat(dtype_, data_, buf.data(), buf.size());
  return buf.data();
}

void CpuActivations::ReadInto(int64_t first, int64_t count, float* dst) const {
  STRATA_CHECK(first >= 0 && count >= 0 && first + count <= n_);
  ConvertToFloat(dtype_, data_ + static_cast<size_t>(first) * DTypeBytes(dtype_), dst,
                 static_cast<size_t>(count));
}

float* CpuActivations::Out(std::vector<float>& buf) const {
  if (type_ == SpanType::kF32) return reinterpret_cast<float*>(data_);
  buf.resize(static_cast<size_t>(n_));
  return buf.data();
}

void CpuActivations::Commit(const float* values) const {
  if (type_ == SpanType::kF32) {
    STRATA_CHECK(values == reinterpret_cast<const float*>(data_));
    return;
  }
  ConvertFromFloat(dtype_, values, data_, static_cast<size_t>(n_));
}

}  // namespace strata
