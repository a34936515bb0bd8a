// PosixFile: a DiskFile over a file descriptor, and the file operations the io_uring and pread
// environments share (open, remove, fallocate, size, fdatasync). Internal to src/io.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/core/status.h"
#include "src/io/file_env.h"

namespace strata {

// Owns its descriptor and closes it on destruction.
class PosixFile : public DiskFile {
 public:
  PosixFile(std::string path, int fd, bool direct) : DiskFile(std::move(path), direct), fd_(fd) {}
  ~PosixFile() override;
  int fd() const { return fd_; }

 private:
  int fd_;
};

struct OpenedFd {
  int fd = -1;
  bool direct = false;  // O_DIRECT took effect
};

// open(2) with the flags `options` imply (O_CLOEXEC always; O_DIRECT when asked and the
// filesystem supports it). Errors as FileEnv::Open describes.
Result<OpenedFd> PosixOpen(const std::string& path, const FileOptions& options);
Status PosixRemove(const std::string& path);
// fallocate(2); falls back to ftruncate(2) where the filesystem cannot preallocate.
Status PosixAllocate(const PosixFile& file, uint64_t bytes);
Result<uint64_t> PosixSize(const PosixFile& file);
Status PosixSync(const PosixFile& file);

// A FileEnv whose files are PosixFiles: remove, allocate, size and sync are the POSIX calls
// above; opening and moving bytes are the subclass's.
class PosixFileEnv : public FileEnv {
 public:
  Status Remove(const std::string& path) override { return PosixRemove(path); }
  Status Allocate(DiskFile* file, uint64_t bytes) override {
    return PosixAllocate(*static_cast<PosixFile*>(file), bytes);
  }
  Result<uint64_t> Size(DiskFile* file) override {
    return PosixSize(*static_cast<PosixFile*>(file));
  }
  Status Sync(DiskFile* file) override { return PosixSync(*static_cast<PosixFile*>(file)); }
};

}  // namespace strata
