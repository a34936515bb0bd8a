// Measurements of the disk `strata profile` measures, each bounded to about a second or two,
// in GB/s (1e9 bytes/s). The processors' probes are the backends' (src/backend/cpu/cpu_probes.h,
// src/backend/device_probes.h). Not thread-safe with each other: run one at a time so that each
// has the whole machine.
#pragma once

#include <cstdint>
#include <string>

#include "src/core/status.h"

namespace strata::profile {

struct DiskRates {
  double read_gbps = 0;
  double write_gbps = 0;
  double page_write_gbps = 0;  // 4 KiB pages at scattered offsets
  double write_wait_bytes = 0;  // read bytes a page-write submission waits behind (see below)
  bool direct = true;          // O_DIRECT was accepted; false: buffered I/O
  std::string file_env;        // the FileEnv that moved the bytes: "io_uring" or "pread"
};
// Measures `dir`'s disk through strata's own disk tier (src/io/file_env.h, the FileEnv the
// executor gets, O_DIRECT where the filesystem allows) on a scratch file of up to `max_bytes`:
// sequential writes then reads of 32 MiB pieces through a ring of one disk-ring half
// (WritePieces, ReadPieces: copies in and out of the ring included, transfers of 1 MiB at the
// env's queue depth, as the executor moves a layer's part), about two seconds each way; then
// about a second of single 4 KiB page writes at scattered offsets, a queue depth of them per
// submission (the executor's decode cache writes); then about a second of the same submissions
// while a second thread reads pieces as the first pass did (the load lane beside the store lane):
// their mean extra time times the rate the reads ran at meanwhile is write_wait_bytes, the reads
// each write waited behind. Removes the file. Errors name the directory and the reason.
Result<DiskRates> MeasureDisk(const std::string& dir, int64_t max_bytes);

// Free bytes in `dir` (statvfs): the disk tier's capacity. (Host memory: src/core/host_memory.h.)
Result<int64_t> FreeDiskBytes(const std::string& dir);

}  // namespace strata::profile
