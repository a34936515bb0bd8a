// The machine's memory read bandwidth as a streaming kernel sees it: the bound a memory-bound
// CPU kernel is measured against.
#pragma once

namespace strata::bench {

// CPU time used so far by the whole process, in seconds.
double ProcessCpuSeconds();

struct ReadBandwidth {
  double wall_gbps = 0;  // bytes per wall-clock second
  double cpu_gbps = 0;   // bytes per CPU-second of the process (what busy cores see under load)
};

// Best of `reps` passes reading a `bytes` buffer (far larger than the last-level cache) with
// `threads` OpenMP threads, each summing its own contiguous slice with the widest vector loads
// the CPU has. GB/s are 1e9 bytes per second.
ReadBandwidth MeasureReadBandwidth(long bytes, int threads, int reps);

}  // namespace strata::bench
