#include "src/io/aligned_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "src/core/check.h"

namespace strata {

Result<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes) {
  STRATA_CHECK(bytes > 0);
  const size_t size = AlignUp(bytes);
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return Status::ResourceExhausted("cannot map " + std::to_string(size) +
                                     " bytes of host memory: " + std::strerror(errno) +
                                     "; lower the plan's host memory or free some");
  }
  // Huge pages first (a hint; failure is harmless), then fault every page in up front.
  if (size >= (size_t{2} << 20)) ::madvise(p, size, MADV_HUGEPAGE);
  ::madvise(p, size, MADV_POPULATE_WRITE);
  return AlignedBuffer(static_cast<uint8_t*>(p), size);
}

AlignedBuffer::~AlignedBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace strata
