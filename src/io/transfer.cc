#include "src/io/transfer.h"

#include <cerrno>
#include <cstring>

namespace strata {
namespace {

std::string Describe(IoOp op, const std::string& path, uint64_t offset, size_t length) {
  return std::string(op == IoOp::kRead ? "read of " : "write of ") + std::to_string(length) +
         " bytes at offset " + std::to_string(offset) + " of " + path;
}

Status CheckRequest(const IoRequest& r) {
  if (r.file == nullptr || (r.buffer == nullptr && r.length > 0)) {
    return Status::InvalidArgument("I/O request without a file or a buffer");
  }
  if (r.file->direct() && !(IsAligned(r.offset) && IsAligned(r.length) &&
                            IsAligned(reinterpret_cast<uintptr_t>(r.buffer)))) {
    return Status::InvalidArgument(
        Describe(r.op, r.file->path(), r.offset, r.length) +
        ": the file is opened for direct I/O, so offset, length and buffer must be multiples of " +
        std::to_string(kDirectIoAlignment) + " bytes; use AlignedBuffer and pad the length");
  }
  return Status::Ok();
}

}  // namespace

std::vector<IoChunk> PrepareChunks(std::span<const IoRequest> requests, size_t max_bytes,
                                   IoEvent* event) {
  std::vector<IoChunk> chunks;
  for (const IoRequest& r : requests) {
    if (Status s = CheckRequest(r); !s.ok()) {
      event->AddPending(1);
      event->Complete(s);
      continue;
    }
    auto* base = static_cast<uint8_t*>(r.buffer);
    for (size_t at = 0; at < r.length; at += max_bytes) {
      const size_t n = std::min(max_bytes, r.length - at);
      chunks.push_back(IoChunk{r.op, r.file, r.offset + at, n, base + at, event, 0});
    }
  }
  event->AddPending(chunks.size());
  return chunks;
}

Status AdvanceChunk(IoChunk* c, int64_t result) {
  if (result == -EINTR || result == -EAGAIN) return Status::Ok();
  if (result < 0) {
    return TransferError(c->op, c->file->path(), c->offset + c->done, c->remaining(),
                         static_cast<int>(-result));
  }
  c->done += static_cast<size_t>(result);
  if (c->remaining() == 0) return Status::Ok();
  // Nothing moved means the end of the file. On a direct file a partial transfer that leaves
  // the position unaligned also means the end: O_DIRECT stops short only there.
  if (result == 0 || (c->file->direct() && !IsAligned(c->offset + c->done))) {
    if (c->op == IoOp::kRead) return ShortReadError(c->file->path(), c->offset, c->length, c->done);
    return TransferError(c->op, c->file->path(), c->offset + c->done, c->remaining(), EIO);
  }
  return Status::Ok();
}

Status TransferError(IoOp op, const std::string& path, uint64_t offset, size_t length, int err) {
  const std::string what = Describe(op, path, offset, length) + " failed: " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) {
    return Status::ResourceExhausted(what +
                                     "; free space on that device or move the file "
                                     "(e.g. --offload-dir) to one with room");
  }
  if (err == EINVAL) return Status::InvalidArgument(what);
  return Status::IoError(what + "; check the device (dmesg) and the file");
}

Status AllocateError(const std::string& path, uint64_t bytes, int err) {
  const std::string what =
      "cannot reserve " + std::to_string(bytes) + " bytes for " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) {
    return Status::ResourceExhausted(what + "; free space on that device or choose one with room");
  }
  return Status::IoError(what);
}

Status ShortReadError(const std::string& path, uint64_t offset, size_t length, size_t got) {
  return Status::IoError("short read: " + Describe(IoOp::kRead, path, offset, length) +
                         " ended after " + std::to_string(got) +
                         " bytes; the file is shorter than expected (truncated or replaced?)");
}

}  // namespace strata
