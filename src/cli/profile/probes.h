// Measurements of the machine `strata profile` runs on, each bounded to about a second or two.
// Rates are in GB/s (1e9 bytes/s) or TFLOPS. Not thread-safe with each other: run one at a time
// so that each has the whole machine.
#pragma once

#include <cstdint>
#include <string>

#include "src/core/status.h"

namespace strata::profile {

// Host memory read bandwidth, all cores.
double HostReadGbps();
// One thread's memcpy bandwidth: what the CPU build's emulated device copy thread moves.
double MemcpyGbps();
// MemcpyGbps while a second thread runs GemmWeightStreamGbps' GEMMs: the emulated device's
// copies beside its compute, both on the host's memory bus.
double MemcpyBesideGemmGbps();
// fp32 GEMM (kernels/cpu/gemm.h) at a prefill shape (512 x 4096 x 4096) and a decode shape
// (16 x 4096 x 4096), all cores.
double GemmTflops(int rows);
// Weight bytes per second the fp32 GEMM streams from memory when it has almost no arithmetic to
// do: 2 rows against 4096 x 4096 weight matrices taken in turn from 512 MiB of them, so that no
// matrix is still in the caches (as the executor's decode GEMMs go through every layer's weights
// before they come back to the first). This is what bounds a decode GEMM from below on the
// emulated device; plain host reads (HostReadGbps) run faster than the GEMM's packing of weights.
double GemmWeightStreamGbps();
// The CPU attention kernels (kernels/cpu): decode over an fp32 cache and over the default 4-bit
// cache (keys by channel, with its exact tokens), in cache bytes read per second (4-bit: codes
// and params); prefill attention in TFLOPS counted as 4 * tokens^2 * heads * head_dim (FlexGen's
// count, which the cost model uses).
double DecodeAttentionGbps();
double DecodeAttentionQ4Gbps();
double PrefillAttentionTflops();
// 4-bit weight expansion (kernels/cpu/weight_q4.h), elements per second times 2.
double ExpandQ4Gbps();

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

// The size of the CPU's last-level cache (the highest cache level sysfs lists for cpu0), the
// emulated device's cache for weights; 0 when sysfs does not say.
int64_t LastLevelCacheBytes();

// Free bytes in `dir` (statvfs): the disk tier's capacity. (Host memory: src/core/host_memory.h.)
Result<int64_t> FreeDiskBytes(const std::string& dir);

}  // namespace strata::profile
