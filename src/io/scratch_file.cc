#include "src/io/scratch_file.h"

#include <unistd.h>

#include <atomic>
#include <chrono>

namespace strata {
namespace {

// Unique within the process (counter) and across processes sharing a directory (pid, clock).
std::string UniqueName() {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return ".strata-scratch-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(now);
}

}  // namespace

Result<std::unique_ptr<ScratchFile>> ScratchFile::Create(FileEnv* env, const std::string& dir,
                                                         uint64_t bytes) {
  const std::string fix = "pass --offload-dir a writable directory on a disk with room";
  const std::string path = (dir.empty() ? std::string(".") : dir) + "/" + UniqueName();
  Result<std::unique_ptr<DiskFile>> file = env->Open(path, {FileMode::kCreate, /*direct=*/true});
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) {
      return Status::NotFound("offload directory " + dir + " does not exist; create it (mkdir -p " +
                              dir + ") or " + fix);
    }
    return Status::IoError("cannot create a scratch file in offload directory " + dir + " (" +
                           file.status().message() + "); " + fix);
  }
  // Unlinked before anything else can fail: from here on no path leaves a file behind.
  if (Status s = env->Remove(path); !s.ok()) {
    return Status::IoError("cannot unlink scratch file " + path + " (" + s.message() + "); " + fix);
  }
  const uint64_t size = AlignUp(bytes);
  if (Status s = env->Allocate(file->get(), size); !s.ok()) {
    if (s.code() == StatusCode::kResourceExhausted) {
      return Status::ResourceExhausted("offload directory " + dir + " has no room for " +
                                       std::to_string(size) + " bytes of scratch space (" +
                                       s.message() + "); " + fix);
    }
    return s.WithContext("offload directory " + dir);
  }
  return std::unique_ptr<ScratchFile>(new ScratchFile(std::move(*file), size, dir));
}

}  // namespace strata
