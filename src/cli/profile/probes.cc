#include "src/cli/profile/probes.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "policy/memory_accounting.h"
#include "src/io/aligned_buffer.h"
#include "src/io/file_env.h"
#include "src/io/scratch_file.h"
#include "src/memory/disk_pieces.h"

namespace strata::profile {

using Clock = std::chrono::steady_clock;

Result<DiskRates> MeasureDisk(const std::string& dir, int64_t max_bytes) {
  constexpr uint64_t kSubmission = kDiskRingHalfBytes;  // what one executor submission moves
  constexpr uint64_t kPage = kDirectIoAlignment;
  constexpr uint64_t kPageStride = uint64_t{64} << 10;  // pages of different KV rows
  const uint64_t bytes = std::max<int64_t>(0, max_bytes) / kSubmission * kSubmission;
  if (bytes == 0) {
    return Status::IoError("no space to measure the disk in '" + dir + "': the probe needs a " +
                           std::to_string(kSubmission >> 20) + " MiB scratch file");
  }
  // The staging ring (registered, as the executor's pinned arena is), the memory the pieces move
  // from and to, and the pages written (not registered: writes never use fixed buffers).
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer ring, AlignedBuffer::Allocate(kSubmission));
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer memory, AlignedBuffer::Allocate(kSubmission));
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer page, AlignedBuffer::Allocate(kPage));
  std::memset(memory.data(), 0x5A, kSubmission);
  std::memset(page.data(), 0x5A, kPage);
  FileEnvOptions options;
  options.registered_buffers.push_back(ring.span());
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<FileEnv> env, NewFileEnv(options));
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(env.get(), dir, bytes);
  if (!scratch.ok()) return scratch.status().WithContext("measuring the disk");
  DiskFile* file = (*scratch)->file();
  DiskRates rates;
  rates.direct = file->direct();
  rates.file_env = env->name();
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  // One submission of `requests`, awaited, as the executor's lanes do.
  const auto submit = [&](std::span<const IoRequest> requests) {
    IoEvent event;
    env->Submit(requests, &event);
    return event.Wait();
  };
  // Sequential passes of one ring half per call, moved as the executor moves a layer's part:
  // between memory and the file through the ring, stopping after about two seconds.
  const auto sequential = [&](IoOp op) -> Result<double> {
    uint64_t done = 0;
    const auto start = Clock::now();
    while (done < bytes && seconds_since(start) < 2.0) {
      const DiskPiece piece{done, memory.data(), kSubmission};
      STRATA_RETURN_IF_ERROR(op == IoOp::kRead ? ReadPieces(*env, file, {&piece, 1}, ring.span())
                                               : WritePieces(*env, file, {&piece, 1}, ring.span()));
      done += kSubmission;
    }
    if (op == IoOp::kWrite) STRATA_RETURN_IF_ERROR(env->Sync(file));
    return done / seconds_since(start) / 1e9;
  };
  const std::string context = "measuring the disk in '" + dir + "'";
  Result<double> write = sequential(IoOp::kWrite);
  if (!write.ok()) return write.status().WithContext(context);
  Result<double> read = sequential(IoOp::kRead);
  if (!read.ok()) return read.status().WithContext(context);
  rates.write_gbps = *write;
  rates.read_gbps = *read;
  // Decode cache writes: single pages at scattered offsets, a queue depth of them per submission.
  const int per_submission = options.queue_depth;
  const uint64_t slots = bytes / kPageStride;
  std::vector<IoRequest> requests(static_cast<size_t>(per_submission));
  uint64_t pages = 0;
  // Awaits one submission of the next pages; returns its seconds.
  const auto write_pages = [&]() -> Result<double> {
    for (IoRequest& r : requests) {
      r = {IoOp::kWrite, file, (pages++ % slots) * kPageStride, static_cast<size_t>(kPage),
           page.data()};
    }
    const auto t = Clock::now();
    STRATA_RETURN_IF_ERROR(submit(requests));
    return seconds_since(t);
  };
  int submissions = 0;
  const auto start = Clock::now();
  while (seconds_since(start) < 1.0) {
    Result<double> s = write_pages();
    if (!s.ok()) return s.status().WithContext(context);
    ++submissions;
  }
  const double alone_s = seconds_since(start) / submissions;
  rates.page_write_gbps = pages * kPage / seconds_since(start) / 1e9;

  // The same submissions, spaced by 0-2 ms, while reads stream as the load lane streams a layer's
  // weights: one thread reading one ring half after another through the registered ring
  // (ReadPieces keeps the next slot's reads queued while it copies one out), so that a write finds
  // the env's read depth ahead of it (the cost model shortens the wait where a layer has fewer
  // reads left).
  std::atomic<bool> stop{false}, counting{false};
  std::atomic<uint64_t> read_bytes{0};  // read while the writes were timed
  Status read_status;
  std::thread reader([&] {
    for (uint64_t at = 0; !stop.load(); at = (at + kSubmission) % bytes) {
      const DiskPiece piece{at, memory.data(), kSubmission};
      read_status = ReadPieces(*env, file, {&piece, 1}, ring.span());
      if (!read_status.ok()) return;
      if (counting.load()) read_bytes += kSubmission;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double waited_s = 0;
  int waits = 0;
  Status write_status;
  counting = true;
  const auto loaded = Clock::now();
  while (seconds_since(loaded) < 1.0) {
    Result<double> s = write_pages();
    if (!s.ok()) {
      write_status = s.status();
      break;
    }
    waited_s += *s - alone_s;
    std::this_thread::sleep_for(std::chrono::microseconds(400 * (waits++ % 6)));
  }
  counting = false;
  const double read_gbps = read_bytes.load() / seconds_since(loaded) / 1e9;
  stop = true;
  reader.join();
  if (!write_status.ok()) return write_status.WithContext(context);
  if (!read_status.ok()) return read_status.WithContext(context);
  // The reads a write waited behind: its mean extra time at the rate they were served.
  rates.write_wait_bytes = waits > 0 ? std::max(0.0, waited_s / waits * read_gbps * 1e9) : 0;
  return rates;
}

Result<int64_t> FreeDiskBytes(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) {
    return Status::IoError("cannot stat '" + dir + "': " + std::strerror(errno));
  }
  return int64_t(fs.f_bavail) * int64_t(fs.f_frsize);
}

}  // namespace strata::profile
