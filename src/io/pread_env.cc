#include "src/io/pread_env.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/core/thread_name.h"
#include "src/io/posix_file.h"
#include "src/io/transfer.h"

namespace strata {
namespace {

// Threads that move the chunks of one queue, first come first served.
class PreadPool {
 public:
  // `name` names the threads.
  PreadPool(int threads, const std::string& name) {
    for (int i = 0; i < threads; ++i) {
      workers_.emplace_back([this, name] {
        NameThisThread(name);
        Work();
      });
    }
  }
  // Finishes the queued chunks, then joins the threads.
  ~PreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void Submit(const std::vector<IoChunk>& chunks) {
    if (chunks.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.insert(queue_.end(), chunks.begin(), chunks.end());
    }
    ready_.notify_all();
  }

 private:
  void Work() {
    for (;;) {
      IoChunk chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ with nothing left
        chunk = queue_.front();
        queue_.pop_front();
      }
      chunk.event->Complete(Transfer(&chunk));
    }
  }

  // Moves the whole chunk, continuing after partial transfers.
  static Status Transfer(IoChunk* c) {
    const int fd = static_cast<PosixFile*>(c->file)->fd();
    while (c->remaining() > 0) {
      const off_t at = static_cast<off_t>(c->offset + c->done);
      const ssize_t n = c->op == IoOp::kRead
                            ? ::pread(fd, c->buffer + c->done, c->remaining(), at)
                            : ::pwrite(fd, c->buffer + c->done, c->remaining(), at);
      STRATA_RETURN_IF_ERROR(AdvanceChunk(c, n < 0 ? -int64_t{errno} : int64_t{n}));
    }
    return Status::Ok();
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<IoChunk> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// Reads and writes have a pool each, as the io_uring env has a ring each: a write never waits
// for a thread behind queued reads.
class PreadEnv final : public PosixFileEnv {
 public:
  explicit PreadEnv(const FileEnvOptions& options)
      : max_request_bytes_(options.max_request_bytes),
        reads_(Threads(options.read_queue_depth, options.pread_threads), "strata-pread-rd"),
        writes_(Threads(options.queue_depth, options.pread_threads), "strata-pread-wr") {}

  std::string name() const override { return "pread"; }

  Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                         const FileOptions& options) override {
    STRATA_ASSIGN_OR_RETURN(OpenedFd opened, PosixOpen(path, options));
    return std::unique_ptr<DiskFile>(new PosixFile(path, opened.fd, opened.direct));
  }
  void Submit(std::span<const IoRequest> requests, IoEvent* event) override {
    std::vector<IoChunk> reads, writes;
    for (const IoChunk& c : PrepareChunks(requests, max_request_bytes_, event)) {
      (c.op == IoOp::kRead ? reads : writes).push_back(c);
    }
    reads_.Submit(reads);
    writes_.Submit(writes);
  }

 private:
  static int Threads(int depth, int most) { return std::max(1, std::min(depth, most)); }

  const size_t max_request_bytes_;
  PreadPool reads_;
  PreadPool writes_;
};

}  // namespace

std::unique_ptr<FileEnv> NewPreadEnv(const FileEnvOptions& options) {
  return std::make_unique<PreadEnv>(options);
}

}  // namespace strata
