// ScratchFile: disk space in the offload directory for KV cache and activations that live on
// disk. The file is created under a unique name and unlinked at once, keeping only the open
// descriptor, so it vanishes when the process ends however it ends (error, kill, crash).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/core/status.h"
#include "src/io/file_env.h"

namespace strata {

// Thread-compatible handle; transfers go through the env it was created with.
// REQUIRES: destroyed before that env.
class ScratchFile {
 public:
  // Creates a direct-I/O scratch file of `bytes` (rounded up to kDirectIoAlignment) in `dir`,
  // preallocated so that a full disk fails here rather than mid-run. Errors name `dir`:
  // NotFound when it does not exist, IoError when it is not a writable directory,
  // ResourceExhausted (with the bytes needed) when the device has no room.
  static Result<std::unique_ptr<ScratchFile>> Create(FileEnv* env, const std::string& dir,
                                                     uint64_t bytes);

  DiskFile* file() const { return file_.get(); }
  uint64_t size_bytes() const { return size_bytes_; }
  const std::string& dir() const { return dir_; }

 private:
  ScratchFile(std::unique_ptr<DiskFile> file, uint64_t size_bytes, std::string dir)
      : file_(std::move(file)), size_bytes_(size_bytes), dir_(std::move(dir)) {}
  std::unique_ptr<DiskFile> file_;
  uint64_t size_bytes_;
  std::string dir_;
};

}  // namespace strata
