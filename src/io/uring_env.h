// UringEnv: the FileEnv of the disk tier, on io_uring. Two rings per environment, one for reads
// and one for writes (uring_queue.h), so that the store lane's writes never wait for entries
// behind the load lane's reads. Any lane submits (each ring's submission side is behind a mutex
// and submits in batches, one io_uring_enter per Submit call and direction), and each ring has
// an I/O thread that reaps completions, continues partial transfers and completes events. Files
// are registered in each ring's sparse fixed-file table; the buffers of
// FileEnvOptions::registered_buffers are registered once, with the read ring, and read into with
// READ_FIXED. No SQPOLL: on these machines it burned a core for nothing.
#pragma once

#include <memory>

#include "src/io/file_env.h"

namespace strata {

// Unsupported when the kernel or a seccomp profile refuses io_uring (the message carries the
// errno and says to use STRATA_IO=pread); ResourceExhausted when the buffers cannot be
// registered (ENOMEM: RLIMIT_MEMLOCK too small; the message gives the limit and the bytes).
Result<std::unique_ptr<FileEnv>> NewUringEnv(const FileEnvOptions& options);

}  // namespace strata
