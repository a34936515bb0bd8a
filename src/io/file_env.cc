#include "src/io/file_env.h"

#include <cstdlib>
#include <mutex>
#include <string_view>

#include "src/core/check.h"
#include "src/core/log.h"
#include "src/io/pread_env.h"
#include "src/io/uring_env.h"

namespace strata {

Result<std::unique_ptr<FileEnv>> NewFileEnv(const FileEnvOptions& options) {
  STRATA_CHECK(options.max_request_bytes > 0 && IsAligned(options.max_request_bytes) &&
               options.max_request_bytes <= (size_t{1} << 30));
  FileEnvKind kind = options.kind;
  if (kind == FileEnvKind::kAuto) {
    const char* forced = std::getenv("STRATA_IO");
    const std::string_view v = forced != nullptr ? forced : "";
    if (v == "pread") kind = FileEnvKind::kPread;
    if (v == "uring" || v == "io_uring") kind = FileEnvKind::kUring;
    if (!v.empty() && kind == FileEnvKind::kAuto) {
      return Status::InvalidArgument("STRATA_IO=" + std::string(v) +
                                     " is not a file environment; use pread or uring");
    }
  }
  if (kind == FileEnvKind::kPread) return NewPreadEnv(options);
  Result<std::unique_ptr<FileEnv>> uring = NewUringEnv(options);
  if (uring.ok() || kind == FileEnvKind::kUring) return uring;
  static std::once_flag warned;
  std::call_once(warned, [&] {
    LogWarn("io_uring unavailable (" + uring.status().message() + "); using the pread thread pool");
  });
  return NewPreadEnv(options);
}

}  // namespace strata
