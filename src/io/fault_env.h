// FaultInjectingEnv: a FileEnv that passes everything to another one except the failures its
// rules ask for: short reads, EIO on reads or writes, ENOSPC on writes and preallocation. Tests
// use it to check that every I/O failure ends in a clear Status, never a hang or silent damage.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/io/file_env.h"

namespace strata {

enum class IoFault {
  kShortRead,   // a read gets the first half of its bytes, then meets the end of the file
  kReadError,   // a read fails with EIO
  kWriteError,  // a write fails with EIO
  kNoSpace,     // a write, or Allocate(), fails with ENOSPC
};

struct FaultRule {
  IoFault fault = IoFault::kReadError;
  std::string path_contains;         // files whose path contains this; empty: every file
  uint64_t offset_begin = 0;         // requests overlapping [offset_begin, offset_end)
  uint64_t offset_end = UINT64_MAX;  // (Allocate() covers [0, bytes))
  int count = -1;                    // times the rule fires before it retires; -1: forever
};

// Thread-safe. Failed requests complete with the same Status a real failure would produce.
class FaultInjectingEnv final : public FileEnv {
 public:
  explicit FaultInjectingEnv(std::unique_ptr<FileEnv> base);

  // Adds a rule; the first live rule that matches a request decides its fault.
  void AddRule(const FaultRule& rule);
  // Faults injected so far.
  int fired() const;

  std::string name() const override { return "fault(" + base_->name() + ")"; }
  Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                         const FileOptions& options) override {
    return base_->Open(path, options);
  }
  Status Remove(const std::string& path) override { return base_->Remove(path); }
  Status Allocate(DiskFile* file, uint64_t bytes) override;
  Result<uint64_t> Size(DiskFile* file) override { return base_->Size(file); }
  Status Sync(DiskFile* file) override { return base_->Sync(file); }
  void Submit(std::span<const IoRequest> requests, IoEvent* event) override;

 private:
  enum class Target { kRead, kWrite, kAllocate };
  // The fault for an operation on [offset, offset + length) of `path`, consuming one firing.
  bool Match(Target target, const std::string& path, uint64_t offset, uint64_t length,
             IoFault* fault);

  std::unique_ptr<FileEnv> base_;
  mutable std::mutex mu_;
  std::vector<FaultRule> rules_;
  int fired_ = 0;
};

}  // namespace strata
