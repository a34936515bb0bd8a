// The CPU backend's activations (backend.h: kF32, kF16 or kBF16 spans) as the fp32 its kernels
// take. An op resolves each activation span when it is given (checking its type and size) and,
// inside its stream work, when the data is ready, reads it as fp32 — a kF32 span in place, a
// half one converted into a buffer of the running thread — and rounds what it computed back into
// a half span. So the CPU backend computes in fp32 whatever its activations are stored in: as
// the device it stands in for with CpuBackendOptions::activations, and on the host side of CPU
// attention delegated by a GPU run (whose q, k, v and cache are half).
#pragma once

#include <cstdint>
#include <vector>

#include "src/backend/memory.h"
#include "src/core/dtype.h"

namespace strata {

class CpuActivations {
 public:
  // `span`: `n` elements of kF32, kF16 or kBF16 of an arena of the CPU backend (checked).
  CpuActivations(const DeviceSpan& span, int64_t n);

  SpanType type() const { return type_; }
  int64_t size() const { return n_; }

  // The elements as fp32, to read and (for a kF32 span) to write in place: the span's own memory
  // for kF32, else `buf` holding them converted.
  float* Read(std::vector<float>& buf) const;
  // Elements [first, first + count) converted into dst[count].
  void ReadInto(int64_t first, int64_t count, float* dst) const;
  // Where to compute all the elements when none is read first: the span's own memory for kF32,
  // else `buf` (sized, its contents left as they are).
  float* Out(std::vector<float>& buf) const;
  // Stores the n elements computed at `values` (Read's or Out's pointer): nothing to do for
  // kF32, rounded into the span otherwise.
  void Commit(const float* values) const;

 private:
  uint8_t* data_ = nullptr;
  SpanType type_ = SpanType::kF32;
  DType dtype_ = DType::kF32;
  int64_t n_ = 0;
};

}  // namespace strata
