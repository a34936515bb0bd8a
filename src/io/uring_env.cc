#include "src/io/uring_env.h"

#include <liburing.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "src/core/check.h"
#include "src/io/posix_file.h"
#include "src/io/transfer.h"

namespace strata {
namespace {

constexpr unsigned kFileSlots = 64;
constexpr size_t kMaxRegisteredBytes = size_t{1} << 30;  // the kernel's limit per fixed buffer

class UringEnv;

// A PosixFile that holds a slot of the ring's fixed-file table (slot -1: none was free).
class UringFile final : public PosixFile {
 public:
  UringFile(std::string path, OpenedFd opened, UringEnv* env, int slot)
      : PosixFile(std::move(path), opened.fd, opened.direct), env_(env), slot_(slot) {}
  ~UringFile() override;
  int slot() const { return slot_; }

 private:
  UringEnv* env_;
  int slot_;
};

class UringEnv final : public PosixFileEnv {
 public:
  explicit UringEnv(const FileEnvOptions& options)
      : max_request_bytes_(options.max_request_bytes),
        ops_(static_cast<size_t>(std::max(1, options.queue_depth))) {}

  ~UringEnv() override {
    if (reaper_.joinable()) {
      std::unique_lock<std::mutex> lock(mu_);
      room_.wait(lock, [&] { return free_.size() == ops_.size(); });
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      STRATA_CHECK(sqe != nullptr);
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data(sqe, nullptr);  // tells the reaper to stop
      FlushLocked();
      lock.unlock();
      reaper_.join();
    }
    if (ring_live_) io_uring_queue_exit(&ring_);  // also drops the registered buffers and files
  }

  Status Init(const FileEnvOptions& options) {
    const int rc = io_uring_queue_init(static_cast<unsigned>(ops_.size()), &ring_, 0);
    if (rc < 0) {
      return Status::Unsupported(
          std::string("io_uring_queue_init failed: ") + std::strerror(-rc) +
          " (EPERM: a seccomp profile or kernel.io_uring_disabled refuses io_uring; ENOSYS: the "
          "kernel lacks it); run with STRATA_IO=pread to use the pread thread pool");
    }
    ring_live_ = true;
    STRATA_RETURN_IF_ERROR(RegisterBuffers(options.registered_buffers));
    // Without a fixed-file table (old kernels) files are passed by descriptor.
    const bool fixed_files = io_uring_register_files_sparse(&ring_, kFileSlots) == 0;
    slot_used_.assign(fixed_files ? kFileSlots : 0, false);
    for (Op& op : ops_) free_.push_back(&op);
    reaper_ = std::thread([this] { Reap(); });
    return Status::Ok();
  }

  std::string name() const override { return "io_uring"; }

  Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                         const FileOptions& options) override {
    STRATA_ASSIGN_OR_RETURN(OpenedFd opened, PosixOpen(path, options));
    int slot = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find(slot_used_.begin(), slot_used_.end(), false);
      if (it != slot_used_.end() &&
          io_uring_register_files_update(&ring_, static_cast<unsigned>(it - slot_used_.begin()),
                                         &opened.fd, 1) == 1) {
        *it = true;
        slot = static_cast<int>(it - slot_used_.begin());
      }
    }
    return std::unique_ptr<DiskFile>(new UringFile(path, opened, this, slot));
  }

  void ReleaseSlot(int slot) {
    std::lock_guard<std::mutex> lock(mu_);
    int none = -1;
    io_uring_register_files_update(&ring_, static_cast<unsigned>(slot), &none, 1);
    slot_used_[static_cast<size_t>(slot)] = false;
  }

  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    std::vector<IoChunk> chunks = PrepareChunks(requests, max_request_bytes_, event);
    if (chunks.empty()) return;
    std::unique_lock<std::mutex> lock(mu_);
    for (const IoChunk& c : chunks) {
      while (free_.empty()) {
        FlushLocked();
        room_.wait(lock);
      }
      Op* op = free_.back();
      free_.pop_back();
      op->chunk = c;
      op->buf_index = FindRegion(c.buffer, c.length);
      PrepLocked(op);
    }
    FlushLocked();
  }

 private:
  struct Op {  // one transfer in flight, owning one submission queue entry at a time
    IoChunk chunk;
    int buf_index = -1;  // index into the registered buffers, or -1
  };
  struct Region {
    uintptr_t begin, end;
  };

  Status RegisterBuffers(const std::vector<std::span<uint8_t>>& spans) {
    std::vector<iovec> iovs;
    size_t total = 0;
    for (std::span<uint8_t> s : spans) {
      for (size_t at = 0; at < s.size(); at += kMaxRegisteredBytes) {
        iovs.push_back({s.data() + at, std::min(kMaxRegisteredBytes, s.size() - at)});
      }
      total += s.size();
    }
    if (iovs.empty()) return Status::Ok();
    std::sort(iovs.begin(), iovs.end(),
              [](const iovec& a, const iovec& b) { return a.iov_base < b.iov_base; });
    const int rc =
        io_uring_register_buffers(&ring_, iovs.data(), static_cast<unsigned>(iovs.size()));
    if (rc < 0) {
      rlimit limit{};
      ::getrlimit(RLIMIT_MEMLOCK, &limit);
      const std::string memlock =
          limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur) + " bytes";
      return Status::ResourceExhausted("io_uring cannot register " + std::to_string(total) +
                                       " bytes of buffers: " + std::strerror(-rc) +
                                       " (RLIMIT_MEMLOCK is " + memlock +
                                       "; raise it, e.g. `ulimit -l unlimited` or "
                                       "LimitMEMLOCK=infinity, or use STRATA_IO=pread)");
    }
    for (const iovec& v : iovs) {
      const auto begin = reinterpret_cast<uintptr_t>(v.iov_base);
      regions_.push_back({begin, begin + v.iov_len});
    }
    return Status::Ok();
  }

  // The registered buffer holding all of [p, p + n), or -1.
  int FindRegion(const uint8_t* p, size_t n) const {
    const auto begin = reinterpret_cast<uintptr_t>(p);
    auto it = std::upper_bound(regions_.begin(), regions_.end(), begin,
                               [](uintptr_t v, const Region& r) { return v < r.begin; });
    if (it == regions_.begin()) return -1;
    --it;
    return begin + n <= it->end ? static_cast<int>(it - regions_.begin()) : -1;
  }

  // Queues the rest of op's transfer. REQUIRES: mu_ held.
  void PrepLocked(Op* op) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    STRATA_CHECK(sqe != nullptr);  // at most ops_.size() entries are ever outstanding
    const IoChunk& c = op->chunk;
    auto* file = static_cast<UringFile*>(c.file);
    const int fd = file->slot() >= 0 ? file->slot() : file->fd();
    uint8_t* buf = c.buffer + c.done;
    const auto n = static_cast<unsigned>(c.remaining());
    const uint64_t at = c.offset + c.done;
    if (c.op == IoOp::kRead) {
      if (op->buf_index >= 0) {
        io_uring_prep_read_fixed(sqe, fd, buf, n, at, op->buf_index);
      } else {
        io_uring_prep_read(sqe, fd, buf, n, at);
      }
    } else if (op->buf_index >= 0) {
      io_uring_prep_write_fixed(sqe, fd, buf, n, at, op->buf_index);
    } else {
      io_uring_prep_write(sqe, fd, buf, n, at);
    }
    if (file->slot() >= 0) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data(sqe, op);
  }

  // REQUIRES: mu_ held.
  void FlushLocked() {
    for (;;) {
      const int rc = io_uring_submit(&ring_);
      if (rc >= 0) return;
      STRATA_CHECK_MSG(rc == -EINTR || rc == -EAGAIN || rc == -EBUSY, std::strerror(-rc));
      std::this_thread::yield();
    }
  }

  // The I/O thread: completes transfers until the shutdown NOP arrives. Each batch of
  // completions is handled under one lock of mu_, which also orders the submitter's writes to an
  // Op before their reads here (as the ring does, invisibly to thread sanitizers).
  void Reap() {
    std::vector<std::pair<IoEvent*, Status>> finished;
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR) continue;
      STRATA_CHECK_MSG(rc == 0, std::strerror(-rc));
      bool stop = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        unsigned head, seen = 0;
        bool resubmitted = false;
        io_uring_for_each_cqe(&ring_, head, cqe) {
          ++seen;
          auto* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
          if (op == nullptr) {
            stop = true;
            continue;
          }
          Status status = AdvanceChunk(&op->chunk, cqe->res);
          if (status.ok() && op->chunk.remaining() > 0) {
            PrepLocked(op);  // the rest of a partial transfer
            resubmitted = true;
            continue;
          }
          finished.emplace_back(op->chunk.event, std::move(status));
          free_.push_back(op);
        }
        io_uring_cq_advance(&ring_, seen);
        if (resubmitted) FlushLocked();
      }
      if (!finished.empty()) room_.notify_all();
      for (auto& [event, status] : finished) event->Complete(status);
      finished.clear();
      if (stop) return;
    }
  }

  const size_t max_request_bytes_;
  io_uring ring_{};
  bool ring_live_ = false;
  std::vector<Region> regions_;  // sorted by begin; index == fixed buffer index
  std::vector<Op> ops_;          // never resized: Op pointers ride in user_data
  std::mutex mu_;                // guards the submission side, free_ and slot_used_
  std::condition_variable room_;
  std::vector<Op*> free_;
  std::vector<bool> slot_used_;
  std::thread reaper_;
};

UringFile::~UringFile() {
  if (slot_ >= 0) env_->ReleaseSlot(slot_);
}

}  // namespace

Result<std::unique_ptr<FileEnv>> NewUringEnv(const FileEnvOptions& options) {
  auto env = std::make_unique<UringEnv>(options);
  STRATA_RETURN_IF_ERROR(env->Init(options));
  return std::unique_ptr<FileEnv>(std::move(env));
}

}  // namespace strata
