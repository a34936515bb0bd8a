// MappedFile: a read-only memory map of a whole file. Model readers parse headers out of it and
// hand out views into it, so weights are never copied unless they must be converted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/core/status.h"

namespace strata {

class MappedFile {
 public:
  // Maps `path` read-only. Fails with NotFound for a missing path, InvalidArgument for a directory,
  // IoError when the file cannot be opened or mapped. An empty file maps to size() == 0.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // True when [offset, offset + length) lies inside the file, without overflow.
  bool Contains(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata
