// The machine's memory read bandwidth as a streaming kernel sees it: the bound a memory-bound
// CPU kernel is measured against.
#pragma once

namespace strata::bench {

// Best of `reps` passes reading a `bytes` buffer (far larger than the last-level cache) with
// `threads` OpenMP threads, each summing its own contiguous slice with the widest vector loads
// the CPU has. Returns GB/s (1e9 bytes per second).
double MeasureReadBandwidthGbps(long bytes, int threads, int reps);

}  // namespace strata::bench
