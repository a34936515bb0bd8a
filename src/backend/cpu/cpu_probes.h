// The CPU backend's measurements for `strata profile`: the host's memory and the CPU kernels'
// rates, each bounded to about a second or two. Rates are in GB/s (1e9 bytes/s) or TFLOPS. Not
// thread-safe with each other: run one at a time so that each has the whole machine.
#pragma once

#include <cstdint>

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
// The CPU attention kernels (kernels/cpu): decode over an fp32 cache and over the 4-bit cache
// with keys by channel and `sink` + `window` exact tokens (the default cache's format), in cache
// bytes read per second (4-bit: codes and params); prefill attention in TFLOPS counted as
// 4 * tokens^2 * heads * head_dim (FlexGen's count, which the cost model uses).
double DecodeAttentionGbps();
double DecodeAttentionQ4Gbps(int sink, int window);
double PrefillAttentionTflops();
// 4-bit weight expansion (kernels/cpu/weight_q4.h), elements per second times 2.
double ExpandQ4Gbps();

// The size of the CPU's last-level cache (the highest cache level sysfs lists for cpu0), the
// emulated device's cache for weights; 0 when sysfs does not say.
int64_t LastLevelCacheBytes();

}  // namespace strata::profile
