// AlignedBuffer: page-aligned host memory for direct I/O. The disk tier reads and writes only
// through such buffers: O_DIRECT wants 4 KiB alignment of address, offset and length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/core/status.h"

namespace strata {

// The alignment of offsets, lengths and buffers for files opened with O_DIRECT.
inline constexpr size_t kDirectIoAlignment = 4096;

constexpr uint64_t AlignUp(uint64_t n, uint64_t alignment = kDirectIoAlignment) {
  return (n + alignment - 1) / alignment * alignment;
}
constexpr bool IsAligned(uint64_t n, uint64_t alignment = kDirectIoAlignment) {
  return n % alignment == 0;
}

// An anonymous private mapping, rounded up to whole 4 KiB pages, zero-filled and pre-faulted so
// that the first transfer into it does not pay for page faults. Regions of 2 MiB and more ask for
// transparent huge pages.
//
// This is the memory to register, once, with io_uring (FileEnvOptions::registered_buffers) and,
// in CUDA builds, with cudaHostRegister(data(), size(), 0): the pinned host arena and the staging
// ring are AlignedBuffers. Do not hand cudaHostAlloc memory to io_uring instead (older kernels
// refuse it). Move-only; thread-compatible.
class AlignedBuffer {
 public:
  // ResourceExhausted, naming the size, when the memory cannot be mapped.
  // REQUIRES: bytes > 0.
  static Result<AlignedBuffer> Allocate(size_t bytes);

  AlignedBuffer() = default;
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  // The mapped size: the requested size rounded up to kDirectIoAlignment.
  size_t size() const { return size_; }
  std::span<uint8_t> span() const { return {data_, size_}; }

 private:
  AlignedBuffer(uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata
