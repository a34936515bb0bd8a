// Transfers: the pieces a FileEnv splits requests into, and the rules every implementation
// shares for validating requests, continuing partial transfers and naming failures.
// Internal to src/io.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/core/status.h"
#include "src/io/file_env.h"

namespace strata {

// One piece of a request, at most FileEnvOptions::max_request_bytes long.
struct IoChunk {
  IoOp op = IoOp::kRead;
  DiskFile* file = nullptr;
  uint64_t offset = 0;
  size_t length = 0;
  uint8_t* buffer = nullptr;
  IoEvent* event = nullptr;
  size_t done = 0;  // bytes moved so far

  size_t remaining() const { return length - done; }
};

// Splits `requests` into chunks of at most `max_bytes` and counts them as pending on `event`. A
// request that is invalid (null file or buffer, misaligned on a direct file) is completed on
// `event` with InvalidArgument at once and yields no chunk.
std::vector<IoChunk> PrepareChunks(std::span<const IoRequest> requests, size_t max_bytes,
                                   IoEvent* event);

// Accounts one system call on `chunk` that moved `result` bytes or failed with -errno. Returns ok
// when the transfer may go on (or is finished: chunk->remaining() == 0); EINTR and EAGAIN move
// nothing and go on. A read that reaches the end of the file early, and any other error, returns
// the Status the request completes with.
Status AdvanceChunk(IoChunk* chunk, int64_t result);

// The Status for a transfer that failed with `err`: ResourceExhausted for ENOSPC and EDQUOT,
// InvalidArgument for EINVAL, IoError otherwise; the message names the operation, the file, the
// offset and the length.
Status TransferError(IoOp op, const std::string& path, uint64_t offset, size_t length, int err);

// The Status for reserving `bytes` for `path` that failed with `err` (ENOSPC: ResourceExhausted).
Status AllocateError(const std::string& path, uint64_t bytes, int err);

// The Status for a read of [offset, offset + length) that ended after `got` bytes.
Status ShortReadError(const std::string& path, uint64_t offset, size_t length, size_t got);

}  // namespace strata
