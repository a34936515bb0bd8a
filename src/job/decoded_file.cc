#include "src/job/decoded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace strata {
namespace {

constexpr size_t kInputWindowBytes = 1 << 20;
constexpr unsigned char kZstdMagic[4] = {0x28, 0xB5, 0x2F, 0xFD};

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  const std::string message = what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(message);
  return Status::IoError(message);
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<std::unique_ptr<DecodedFile>> DecodedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  std::unique_ptr<DecodedFile> file(new DecodedFile(path, fd));
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(path + " is a directory; give the path of a JSONL file");
  }
  file->in_buf_.resize(kInputWindowBytes);
  file->in_.src = file->in_buf_.data();
  // Pipes may deliver the magic bytes in pieces; read until four bytes or the end of the file.
  while (file->in_.size < sizeof(kZstdMagic)) {
    STRATA_ASSIGN_OR_RETURN(const size_t n, file->Fill());
    if (n == 0) break;
  }
  const bool magic = file->in_.size >= sizeof(kZstdMagic) &&
                     std::memcmp(file->in_buf_.data(), kZstdMagic, sizeof(kZstdMagic)) == 0;
  if (EndsWith(path, ".zst") && !magic && file->in_.size > 0) {
    return Status::Corrupt(path + " ends in .zst but does not start with the zstd magic bytes; "
                                  "compress it with zstd or drop the .zst suffix");
  }
  if (magic) {
    file->dctx_ = ZSTD_createDCtx();
    if (file->dctx_ == nullptr) return Status::ResourceExhausted("cannot allocate a zstd context");
  }
  return file;
}

DecodedFile::~DecodedFile() {
  ZSTD_freeDCtx(dctx_);
  ::close(fd_);
}

Result<size_t> DecodedFile::Fill() {
  // Keep the unread bytes and append after them; they are at most a few bytes in practice.
  const size_t unread = in_.size - in_.pos;
  std::memmove(in_buf_.data(), in_buf_.data() + in_.pos, unread);
  in_.pos = 0;
  in_.size = unread;
  while (true) {
    const ssize_t n = ::read(fd_, in_buf_.data() + unread, in_buf_.size() - unread);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot read", path_, errno);
    in_.size += static_cast<size_t>(n);
    file_offset_ += static_cast<uint64_t>(n);
    return static_cast<size_t>(n);
  }
}

Result<size_t> DecodedFile::Read(char* buf, size_t capacity) {
  if (!status_.ok()) return status_;
  Result<size_t> n = compressed() ? ReadZstd(buf, capacity) : ReadPlain(buf, capacity);
  if (!n.ok()) status_ = n.status();
  return n;
}

Result<size_t> DecodedFile::ReadPlain(char* buf, size_t capacity) {
  if (in_.pos == in_.size) {
    STRATA_ASSIGN_OR_RETURN(const size_t filled, Fill());
    if (filled == 0) return size_t{0};
  }
  const size_t take = std::min(capacity, in_.size - in_.pos);
  std::memcpy(buf, in_buf_.data() + in_.pos, take);
  in_.pos += take;
  return take;
}

Result<size_t> DecodedFile::ReadZstd(char* buf, size_t capacity) {
  ZSTD_outBuffer out = {buf, capacity, 0};
  while (true) {
    if (in_.pos == in_.size && !output_pending_) {
      STRATA_ASSIGN_OR_RETURN(const size_t filled, Fill());
      if (filled == 0) {
        if (frame_end_) return size_t{0};
        return Status::Corrupt(path_ + " is truncated: the file ends inside a zstd frame at byte " +
                               std::to_string(file_offset()) +
                               "; the lines before it were read, the rest is lost");
      }
    }
    const size_t hint = ZSTD_decompressStream(dctx_, &out, &in_);
    if (ZSTD_isError(hint)) {
      return Status::Corrupt(path_ + " has corrupt zstd data near byte " +
                             std::to_string(file_offset()) + ": " + ZSTD_getErrorName(hint));
    }
    // A hint of 0 means a frame was fully decoded and flushed; zstd stops there, so the input
    // consumed so far ends exactly at the frame end, and nothing is held back even when the
    // output is full. An empty frame returns no bytes: go on.
    frame_end_ = hint == 0;
    output_pending_ = !frame_end_ && out.pos == out.size;
    if (out.pos > 0) return out.pos;
  }
}

}  // namespace strata
