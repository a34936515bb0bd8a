#include "src/io/memory_env.h"

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "src/io/transfer.h"

namespace strata {
namespace {

struct MemoryData {
  std::mutex mu;
  std::vector<uint8_t> bytes;
};

class MemoryFile final : public DiskFile {
 public:
  MemoryFile(std::string path, std::shared_ptr<MemoryData> data)
      : DiskFile(std::move(path), /*direct=*/false), data_(std::move(data)) {}
  MemoryData& data() const { return *data_; }

 private:
  std::shared_ptr<MemoryData> data_;
};

class MemoryEnv final : public FileEnv {
 public:
  std::string name() const override { return "memory"; }

  Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                         const FileOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (options.mode == FileMode::kCreate) {
      if (it != files_.end()) return Status::IoError("cannot create " + path + ": file exists");
      it = files_.emplace(path, std::make_shared<MemoryData>()).first;
    } else if (it == files_.end()) {
      return Status::NotFound(path + ": no such file or directory");
    }
    return std::unique_ptr<DiskFile>(new MemoryFile(path, it->second));
  }

  Status Remove(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (files_.erase(path) == 0) return Status::NotFound(path + ": no such file to remove");
    return Status::Ok();
  }

  Status Allocate(DiskFile* file, uint64_t bytes) override {
    MemoryData& d = static_cast<MemoryFile*>(file)->data();
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.bytes.size() < bytes) d.bytes.resize(bytes);
    return Status::Ok();
  }

  Result<uint64_t> Size(DiskFile* file) override {
    MemoryData& d = static_cast<MemoryFile*>(file)->data();
    std::lock_guard<std::mutex> lock(d.mu);
    return static_cast<uint64_t>(d.bytes.size());
  }

  Status Sync(DiskFile*) override { return Status::Ok(); }

  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    for (const IoChunk& c : PrepareChunks(requests, SIZE_MAX, event)) event->Complete(Transfer(c));
  }

 private:
  static Status Transfer(const IoChunk& c) {
    MemoryData& d = static_cast<MemoryFile*>(c.file)->data();
    std::lock_guard<std::mutex> lock(d.mu);
    if (c.op == IoOp::kWrite) {
      if (d.bytes.size() < c.offset + c.length) d.bytes.resize(c.offset + c.length);
      std::memcpy(d.bytes.data() + c.offset, c.buffer, c.length);
      return Status::Ok();
    }
    const uint64_t have = c.offset < d.bytes.size() ? d.bytes.size() - c.offset : 0;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(have, c.length));
    if (n > 0) std::memcpy(c.buffer, d.bytes.data() + c.offset, n);
    if (n < c.length) return ShortReadError(c.file->path(), c.offset, c.length, n);
    return Status::Ok();
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<MemoryData>> files_;
};

}  // namespace

std::unique_ptr<FileEnv> NewMemoryEnv() { return std::make_unique<MemoryEnv>(); }

}  // namespace strata
