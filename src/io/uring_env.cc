#include "src/io/uring_env.h"

#include <utility>
#include <vector>

#include "src/io/posix_file.h"
#include "src/io/transfer.h"
#include "src/io/uring_queue.h"

namespace strata {
namespace {

constexpr unsigned kFileSlots = 64;

// A PosixFile that holds a slot of each queue's fixed-file table (slot -1: none was free).
class UringFile final : public PosixFile {
 public:
  UringFile(std::string path, OpenedFd opened, UringQueue* reads, UringQueue* writes)
      : PosixFile(std::move(path), opened.fd, opened.direct),
        reads_(reads),
        writes_(writes),
        read_slot_(reads->RegisterFile(opened.fd)),
        write_slot_(writes->RegisterFile(opened.fd)) {}
  ~UringFile() override {
    if (read_slot_ >= 0) reads_->ReleaseFile(read_slot_);
    if (write_slot_ >= 0) writes_->ReleaseFile(write_slot_);
  }

  // `chunk` of this file as its queue (reads or writes) names the file.
  UringTransfer Transfer(const IoChunk& chunk) const {
    const int slot = chunk.op == IoOp::kRead ? read_slot_ : write_slot_;
    return {chunk, slot >= 0 ? slot : fd(), slot >= 0};
  }

 private:
  UringQueue* reads_;
  UringQueue* writes_;
  int read_slot_, write_slot_;
};

class UringEnv final : public PosixFileEnv {
 public:
  explicit UringEnv(const FileEnvOptions& options)
      : max_request_bytes_(options.max_request_bytes),
        reads_(options.read_queue_depth, "strata-io-read"),
        writes_(options.queue_depth, "strata-io-write") {}

  // Writes go through their own ring, so that a small write (a decode step's cache pages) is
  // not queued behind a lane's ring half of reads. Its ring registers no buffers: the kernel
  // pins the pages of each write instead, a few microseconds, and RLIMIT_MEMLOCK is charged
  // once, by the read ring.
  Status Init(const FileEnvOptions& options) {
    STRATA_RETURN_IF_ERROR(reads_.Init(options.registered_buffers, kFileSlots));
    return writes_.Init({}, kFileSlots);
  }

  std::string name() const override { return "io_uring"; }

  Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                         const FileOptions& options) override {
    STRATA_ASSIGN_OR_RETURN(OpenedFd opened, PosixOpen(path, options));
    return std::unique_ptr<DiskFile>(new UringFile(path, opened, &reads_, &writes_));
  }

  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    std::vector<UringTransfer> reads, writes;
    for (const IoChunk& c : PrepareChunks(requests, max_request_bytes_, event)) {
      const UringTransfer t = static_cast<UringFile*>(c.file)->Transfer(c);
      (c.op == IoOp::kRead ? reads : writes).push_back(t);
    }
    reads_.Submit(reads);
    writes_.Submit(writes);
  }

 private:
  const size_t max_request_bytes_;
  // Each, when destroyed, waits for its transfers in flight and stops its I/O thread.
  UringQueue reads_;
  UringQueue writes_;
};

}  // namespace

Result<std::unique_ptr<FileEnv>> NewUringEnv(const FileEnvOptions& options) {
  auto env = std::make_unique<UringEnv>(options);
  STRATA_RETURN_IF_ERROR(env->Init(options));
  return std::unique_ptr<FileEnv>(std::move(env));
}

}  // namespace strata
