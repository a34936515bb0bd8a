// PreadEnv: the FileEnv of a pread/pwrite thread pool, for where io_uring is refused (seccomp
// profiles answer EPERM) or cannot register buffers, and for tests (STRATA_IO=pread).
#pragma once

#include <memory>

#include "src/io/file_env.h"

namespace strata {

// Two pools, one for reads and one for writes (a write never waits for a thread behind reads):
// min(options.read_queue_depth, options.pread_threads) and min(options.queue_depth,
// options.pread_threads) threads, at least 1 each. Never fails.
std::unique_ptr<FileEnv> NewPreadEnv(const FileEnvOptions& options);

}  // namespace strata
