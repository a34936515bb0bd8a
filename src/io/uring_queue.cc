#include "src/io/uring_queue.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "src/core/check.h"
#include "src/core/thread_name.h"

namespace strata {
namespace {

constexpr size_t kMaxRegisteredBytes = size_t{1} << 30;  // the kernel's limit per fixed buffer

}  // namespace

UringQueue::UringQueue(int depth, std::string name)
    : name_(std::move(name)), ops_(static_cast<size_t>(std::max(1, depth))) {}

UringQueue::~UringQueue() {
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

Status UringQueue::Init(const std::vector<std::span<uint8_t>>& buffers, unsigned file_slots) {
  const int rc = io_uring_queue_init(static_cast<unsigned>(ops_.size()), &ring_, 0);
  if (rc < 0) {
    return Status::Unsupported(
        std::string("io_uring_queue_init failed: ") + std::strerror(-rc) +
        " (EPERM: a seccomp profile or kernel.io_uring_disabled refuses io_uring; ENOSYS: the "
        "kernel lacks it); run with STRATA_IO=pread to use the pread thread pool");
  }
  ring_live_ = true;
  STRATA_RETURN_IF_ERROR(RegisterBuffers(buffers));
  // Without a fixed-file table (old kernels) files are passed by descriptor.
  const bool fixed_files = io_uring_register_files_sparse(&ring_, file_slots) == 0;
  slot_used_.assign(fixed_files ? file_slots : 0, false);
  for (Op& op : ops_) free_.push_back(&op);
  reaper_ = std::thread([this] {
    NameThisThread(name_);
    Reap();
  });
  return Status::Ok();
}

int UringQueue::RegisterFile(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(slot_used_.begin(), slot_used_.end(), false);
  if (it == slot_used_.end() ||
      io_uring_register_files_update(&ring_, static_cast<unsigned>(it - slot_used_.begin()), &fd,
                                     1) != 1) {
    return -1;
  }
  *it = true;
  return static_cast<int>(it - slot_used_.begin());
}

void UringQueue::ReleaseFile(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  int none = -1;
  io_uring_register_files_update(&ring_, static_cast<unsigned>(slot), &none, 1);
  slot_used_[static_cast<size_t>(slot)] = false;
}

void UringQueue::Submit(std::span<const UringTransfer> transfers) {
  if (transfers.empty()) return;
  std::unique_lock<std::mutex> lock(mu_);
  for (const UringTransfer& t : transfers) {
    while (free_.empty()) {
      FlushLocked();
      room_.wait(lock);
    }
    Op* op = free_.back();
    free_.pop_back();
    op->transfer = t;
    op->buf_index = FindRegion(t.chunk.buffer, t.chunk.length);
    PrepLocked(op);
  }
  FlushLocked();
}

Status UringQueue::RegisterBuffers(const std::vector<std::span<uint8_t>>& spans) {
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
  const int rc = io_uring_register_buffers(&ring_, iovs.data(), static_cast<unsigned>(iovs.size()));
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

int UringQueue::FindRegion(const uint8_t* p, size_t n) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  auto it = std::upper_bound(regions_.begin(), regions_.end(), begin,
                             [](uintptr_t v, const Region& r) { return v < r.begin; });
  if (it == regions_.begin()) return -1;
  --it;
  return begin + n <= it->end ? static_cast<int>(it - regions_.begin()) : -1;
}

void UringQueue::PrepLocked(Op* op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  STRATA_CHECK(sqe != nullptr);  // at most ops_.size() entries are ever outstanding
  const UringTransfer& t = op->transfer;
  const IoChunk& c = t.chunk;
  uint8_t* buf = c.buffer + c.done;
  const auto n = static_cast<unsigned>(c.remaining());
  const uint64_t at = c.offset + c.done;
  if (c.op == IoOp::kRead) {
    if (op->buf_index >= 0) {
      io_uring_prep_read_fixed(sqe, t.fd, buf, n, at, op->buf_index);
    } else {
      io_uring_prep_read(sqe, t.fd, buf, n, at);
    }
  } else if (op->buf_index >= 0) {
    io_uring_prep_write_fixed(sqe, t.fd, buf, n, at, op->buf_index);
  } else {
    io_uring_prep_write(sqe, t.fd, buf, n, at);
  }
  if (t.fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, op);
}

void UringQueue::FlushLocked() {
  for (;;) {
    const int rc = io_uring_submit(&ring_);
    if (rc >= 0) return;
    STRATA_CHECK_MSG(rc == -EINTR || rc == -EAGAIN || rc == -EBUSY, std::strerror(-rc));
    std::this_thread::yield();
  }
}

// Each batch of completions is handled under one lock of mu_, which also orders the submitter's
// writes to an Op before their reads here (as the ring does, invisibly to thread sanitizers).
void UringQueue::Reap() {
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
        IoChunk& chunk = op->transfer.chunk;
        Status status = AdvanceChunk(&chunk, cqe->res);
        if (status.ok() && chunk.remaining() > 0) {
          PrepLocked(op);  // the rest of a partial transfer
          resubmitted = true;
          continue;
        }
        finished.emplace_back(chunk.event, std::move(status));
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

}  // namespace strata
