// FileEnv: strata's access to files for large transfers, in the manner of LevelDB's Env. One
// interface, four implementations: io_uring (uring_env.h), a pread/pwrite thread pool
// (pread_env.h), in memory (memory_env.h) and a fault-injecting wrapper (fault_env.h).
//
// Use:
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<FileEnv> env, NewFileEnv(options));
//   STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DiskFile> f, env->Open(path, FileOptions{}));
//   IoEvent loaded;
//   IoRequest r{IoOp::kRead, f.get(), offset, length, buffer};
//   env->Submit({&r, 1}, &loaded);   // queue more against other events, then
//   STRATA_RETURN_IF_ERROR(loaded.Wait());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "src/core/status.h"
#include "src/io/aligned_buffer.h"
#include "src/io/io_event.h"

namespace strata {

enum class FileMode {
  kRead,       // an existing file, read-only
  kReadWrite,  // an existing file
  kCreate,     // a new file, read-write; fails when the path exists
};

struct FileOptions {
  FileMode mode = FileMode::kRead;
  // Bypass the page cache (O_DIRECT). Requests on a direct file need offset, length and buffer
  // aligned to kDirectIoAlignment. Where the filesystem has no O_DIRECT (tmpfs) the file is
  // opened buffered instead; DiskFile::direct() tells which. Default true.
  bool direct = true;
};

// An open file. Made by one FileEnv and used only with it. Thread-safe to share between lanes.
// REQUIRES: destroyed before its FileEnv and with no request on it in flight.
class DiskFile {
 public:
  virtual ~DiskFile() = default;
  DiskFile(const DiskFile&) = delete;
  DiskFile& operator=(const DiskFile&) = delete;

  const std::string& path() const { return path_; }
  // True when requests must be aligned (see FileOptions::direct).
  bool direct() const { return direct_; }

 protected:
  DiskFile(std::string path, bool direct) : path_(std::move(path)), direct_(direct) {}

 private:
  std::string path_;
  bool direct_;
};

enum class IoOp { kRead, kWrite };

// One positional transfer between `file` and host memory. Reads fill [buffer, buffer + length)
// from file bytes [offset, offset + length); writes the reverse. A read that meets the end of
// the file before `length` bytes fails (a short read is an error, never silently partial).
struct IoRequest {
  IoOp op = IoOp::kRead;
  DiskFile* file = nullptr;
  uint64_t offset = 0;
  size_t length = 0;
  void* buffer = nullptr;  // REQUIRES: stays valid, and untouched by others, until completion
};

class FileEnv {
 public:
  virtual ~FileEnv() = default;

  // "io_uring", "pread", "memory", or "fault(<wrapped>)"; for logs and reports.
  virtual std::string name() const = 0;

  // Opens `path`. NotFound for a missing file or directory, IoError (naming the path and the
  // reason) when the OS refuses, e.g. a read-only or non-writable directory for kCreate.
  virtual Result<std::unique_ptr<DiskFile>> Open(const std::string& path,
                                                 const FileOptions& options) = 0;
  // Removes the name `path`; open DiskFiles keep their data until closed.
  virtual Status Remove(const std::string& path) = 0;
  // Reserves file bytes [0, bytes) on the device (fallocate), growing the file to at least
  // `bytes`. ResourceExhausted, naming the file and the bytes, when the device is full.
  virtual Status Allocate(DiskFile* file, uint64_t bytes) = 0;
  virtual Result<uint64_t> Size(DiskFile* file) = 0;
  // Makes completed writes durable (fdatasync).
  virtual Status Sync(DiskFile* file) = 0;

  // Queues `requests`, each to complete against `event`; returns without waiting (an
  // implementation may complete some or all before returning). Thread-safe: any lane may submit.
  // Reads and writes are queued apart, each with its own transfers in flight
  // (read_queue_depth, queue_depth): a write never waits for room behind reads (the load lane's
  // ring half of weight reads), nor a read behind writes. Submit may block while a queue is full.
  // Each request is split into transfers of at most FileEnvOptions::max_request_bytes. A bad
  // request (null file or buffer, misaligned on a direct file) completes with InvalidArgument;
  // failed transfers complete with IoError or ResourceExhausted (ENOSPC) naming file and offset.
  virtual void Submit(std::span<const IoRequest> requests, IoEvent* event) = 0;
};

enum class FileEnvKind {
  kAuto,   // io_uring, else the pread pool with one warning; STRATA_IO=pread|uring overrides
  kUring,  // io_uring or an error
  kPread,  // the pread/pwrite thread pool
};

struct FileEnvOptions {
  FileEnvKind kind = FileEnvKind::kAuto;
  // Writes in flight at once: entries of the io_uring write ring; the pread pool's write queue
  // has min(queue_depth, pread_threads) threads. Default 32 (a decode step's pages).
  int queue_depth = 32;
  // Reads in flight at once: entries of the io_uring read ring; the pread pool's read queue has
  // min(read_queue_depth, pread_threads) threads. Default 8: a disk that serves requests in
  // arrival order (the development VM's virtio disk) makes a write wait for every read in
  // flight, and there 8 reads of 1 MiB moved as much as 32 (fio: 1.7 GB/s) while a concurrent
  // 4 KiB write waited 4.7 ms instead of 21 ms.
  int read_queue_depth = 8;
  // Most threads of each of the pread pool's two queues (reads, writes). Default 8.
  int pread_threads = 8;
  // Requests larger than this are split into transfers of this size (bytes, a multiple of
  // kDirectIoAlignment, at most 1 GiB). Default 1 MiB.
  size_t max_request_bytes = size_t{1} << 20;
  // Host memory to register with io_uring as fixed buffers (the pinned arena, staging buffers):
  // reads into these skip per-request page pinning. Other buffers work too, just slower. Only
  // the read ring registers them (writes pin their pages per request, RLIMIT_MEMLOCK is charged
  // once). Registration happens once, at creation; allocate these first. Default none.
  std::vector<std::span<uint8_t>> registered_buffers;
};

// Opens the file environment `options` ask for. With kAuto, an io_uring that the kernel or a
// seccomp profile refuses (ENOSYS, EPERM), or whose buffer registration fails (ENOMEM under
// RLIMIT_MEMLOCK), gives the pread pool instead and logs one warning per process. With kUring
// those failures are errors whose message says how to fix them or to use STRATA_IO=pread.
Result<std::unique_ptr<FileEnv>> NewFileEnv(const FileEnvOptions& options = {});

}  // namespace strata
