// A job file read as its decoded bytes: a plain file as it is, a zstd file decompressed on the
// fly. Only a bounded window of the file is held in memory, whatever its size.
#pragma once

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

// Not thread-safe. Owns its file descriptor.
class DecodedFile {
 public:
  // Opens `path`. The file is zstd when it starts with the zstd magic bytes (28 B5 2F FD); a
  // non-empty file whose name ends in ".zst" but lacks them is Corrupt. Errors: NotFound for a
  // missing file, InvalidArgument for a directory, IoError when the OS refuses.
  static Result<std::unique_ptr<DecodedFile>> Open(const std::string& path);

  ~DecodedFile();
  DecodedFile(const DecodedFile&) = delete;
  DecodedFile& operator=(const DecodedFile&) = delete;

  // Reads up to `capacity` (> 0) decoded bytes into `buf` and returns how many; 0 only at the
  // end of the file. A zstd read stops at the end of each frame, so at_frame_end() can mark
  // frame boundaries exactly. Errors (sticky after the first): Corrupt for damaged zstd data or
  // a file that ends inside a frame, naming the path and the byte offset; IoError.
  Result<size_t> Read(char* buf, size_t capacity);

  bool compressed() const { return dctx_ != nullptr; }
  const std::string& path() const { return path_; }

  // Bytes of the file consumed so far. For zstd at a frame end, the offset just past the frame.
  uint64_t file_offset() const { return file_offset_ - (in_.size - in_.pos); }

  // True when the bytes returned so far end where a zstd frame ends (or nothing was returned
  // yet). Always true for plain files, where every byte is a boundary.
  bool at_frame_end() const { return frame_end_; }

 private:
  DecodedFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  // Refills the input window with the next bytes of the file; returns 0 at end of file.
  Result<size_t> Fill();
  Result<size_t> ReadPlain(char* buf, size_t capacity);
  Result<size_t> ReadZstd(char* buf, size_t capacity);

  std::string path_;
  int fd_ = -1;
  ZSTD_DCtx* dctx_ = nullptr;  // set for zstd files
  std::vector<char> in_buf_;
  ZSTD_inBuffer in_ = {nullptr, 0, 0};  // the unread part of in_buf_ is [pos, size)
  uint64_t file_offset_ = 0;            // bytes read from the file into in_buf_ so far
  bool frame_end_ = true;
  bool output_pending_ = false;  // zstd filled the last output buffer and may hold more
  Status status_;
};

}  // namespace strata
