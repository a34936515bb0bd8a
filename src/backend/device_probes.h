// The CUDA device's rates for `strata profile`: measured in CUDA builds on a machine with a GPU
// (device_probes_cuda.cc), absent otherwise (device_probes_none.cc), when the profile measures the
// CPU build's emulated device instead. Shapes match the emulated device's probes (probes.h) so
// that the two kinds of profile mean the same thing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::profile {

struct DeviceRates {
  std::string name;              // of device 0, e.g. "NVIDIA H100 80GB HBM3"
  int64_t capacity_bytes = 0;    // free device memory when probed
  int64_t cache_bytes = 0;       // L2
  double h2d_gbps = 0;           // pinned host -> device cudaMemcpyAsync, 256 MiB at a time
  double d2h_gbps = 0;           // device -> pinned host
  double d2d_gbps = 0;           // device -> device copy, bytes copied per second
  double memory_gbps = 0;        // device memory: bytes read plus written per second by that copy
  double prefill_tflops = 0;     // fp16 GEMM, 512 x 4096 x 4096, fp32 accumulation, fp16
                                 // output, as the backend's Linears run it (cuBLASLt)
  double decode_tflops = 0;      // the same at 16 rows
  // (rows, TFLOPS) for rows 1, 2, 4, ... 8192: a transformer layer's six Linears (q, k, v, out,
  // FFN up and down at OPT-30B's widths, hidden 7168 and FFN 28672: the FlexGen benchmark's
  // model), each GEMM of `rows` rows, on the backend's cuBLASLt path (a bias in its epilogue
  // costs next to nothing; without one the cublasGemmEx fallback times the same work).
  std::vector<std::pair<int64_t, double>> gemm_tflops_by_rows;
  double attention_gbps = 0;     // fp16-cache decode attention, cache bytes read per second
  double attention_q4_gbps = 0;  // 4-bit-cache decode attention
  double attention_prefill_tflops = 0;  // causal prefill attention, FlexGen's FLOP count
  double dequant_gbps = 0;  // 4-bit weight expansion to fp16, elements per second times 2
};

// Measures device 0, about a second in all; nullopt with `why` set when there is no device (or
// no CUDA in this build).
std::optional<DeviceRates> MeasureDevice(std::string* why);

}  // namespace strata::profile
