#include "src/io/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/io/transfer.h"

namespace strata {

PosixFile::~PosixFile() { ::close(fd_); }

Result<OpenedFd> PosixOpen(const std::string& path, const FileOptions& options) {
  int flags = O_CLOEXEC;
  switch (options.mode) {
    case FileMode::kRead:
      flags |= O_RDONLY;
      break;
    case FileMode::kReadWrite:
      flags |= O_RDWR;
      break;
    case FileMode::kCreate:
      flags |= O_RDWR | O_CREAT | O_EXCL;
      break;
  }
  OpenedFd out;
  out.direct = options.direct;
  out.fd = ::open(path.c_str(), flags | (out.direct ? O_DIRECT : 0), 0644);
  if (out.fd < 0 && errno == EINVAL && out.direct) {
    // The filesystem has no O_DIRECT (tmpfs, some FUSE): go through the page cache instead.
    out.direct = false;
    out.fd = ::open(path.c_str(), flags, 0644);
  }
  if (out.fd >= 0) return out;
  const int err = errno;
  const char* why = std::strerror(err);
  if (err == ENOENT) return Status::NotFound(path + ": no such file or directory");
  if (options.mode == FileMode::kCreate && (err == EACCES || err == EPERM || err == EROFS)) {
    return Status::IoError("cannot create " + path + ": " + why +
                           "; its directory is not writable by this user");
  }
  return Status::IoError("cannot open " + path + ": " + why);
}

Status PosixRemove(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return Status::Ok();
  if (errno == ENOENT) return Status::NotFound(path + ": no such file to remove");
  return Status::IoError("cannot remove " + path + ": " + std::strerror(errno));
}

Status PosixAllocate(const PosixFile& file, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  int rc;
  do {
    rc = ::fallocate(file.fd(), 0, 0, static_cast<off_t>(bytes));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EOPNOTSUPP) rc = ::ftruncate(file.fd(), static_cast<off_t>(bytes));
  return rc == 0 ? Status::Ok() : AllocateError(file.path(), bytes, errno);
}

Result<uint64_t> PosixSize(const PosixFile& file) {
  struct stat st;
  if (::fstat(file.fd(), &st) != 0) {
    return Status::IoError("cannot stat " + file.path() + ": " + std::strerror(errno));
  }
  return static_cast<uint64_t>(st.st_size);
}

Status PosixSync(const PosixFile& file) {
  if (::fdatasync(file.fd()) == 0) return Status::Ok();
  const int err = errno;
  if (err == ENOSPC || err == EDQUOT) {
    return Status::ResourceExhausted("cannot flush " + file.path() + ": " + std::strerror(err) +
                                     "; free space on that device");
  }
  return Status::IoError("cannot flush " + file.path() + ": " + std::strerror(err));
}

}  // namespace strata
