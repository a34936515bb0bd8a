#include "src/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata {

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + " is a directory, not a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError("cannot open " + path + ": " + std::strerror(errno));
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::IoError("cannot map " + path + ": " + std::strerror(err));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace strata
