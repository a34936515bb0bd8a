// ForwardingEnv: a FileEnv that passes every call on to another one. Tests derive from it and
// override what they watch or change (counting requests or preallocations, delaying completions).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>

#include "src/io/file_env.h"

namespace strata::io_testing {

class ForwardingEnv : public FileEnv {
 public:
  explicit ForwardingEnv(std::unique_ptr<FileEnv> base) : base_(std::move(base)) {}

  std::string name() const override { return base_->name(); }
  Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                         const FileOptions& options) override {
    return base_->Open(path, options);
  }
  Status Remove(const std::string& path) override { return base_->Remove(path); }
  Status Allocate(DiskFile* file, uint64_t bytes) override { return base_->Allocate(file, bytes); }
  Result<uint64_t> Size(DiskFile* file) override { return base_->Size(file); }
  Status Sync(DiskFile* file) override { return base_->Sync(file); }
  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    base_->Submit(requests, event);
  }

 protected:
  FileEnv& base() { return *base_; }

 private:
  std::unique_ptr<FileEnv> base_;
};

}  // namespace strata::io_testing
