// HardwareSpec: what one machine offers strata — capacities of its three tiers and the rates of
// its links and compute units — as plain data. Profiles live in configs/hardware/*.yaml with one
// key per field; `strata profile` measures one. Units are in the names: bytes, GB/s (1e9 bytes
// per second) and TFLOPS (1e12 floating-point operations per second).
//
// Rates describe the hardware *as driven by an implementation*: a decode attention kernel that
// reads the cache at 80% of HBM bandwidth and one that reaches 25% are different profiles of one
// card. That is also how FlexGen's fitted constants are to be read (configs/hardware/t4-flexgen).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

// One point of the GEMM rate curve: fp16 GEMM TFLOPS of a transformer layer's Linears when each
// GEMM has `rows` rows (a micro-batch's tokens).
struct GemmRate {
  int64_t rows = 0;
  double tflops = 0;
};

struct HardwareSpec {
  std::string name;
  std::string description;  // where the numbers come from: measured, published, or estimated

  // Capacities strata may use (after the OS, the CUDA context and other tenants).
  int64_t gpu_capacity_bytes = 0;
  int64_t cpu_capacity_bytes = 0;   // pinned host memory
  int64_t disk_capacity_bytes = 0;  // offload directory, including weights read from the store

  // Links.
  double h2d_gbps = 0;         // pinned host -> device copies
  double d2h_gbps = 0;         // device -> pinned host copies
  double disk_read_gbps = 0;   // disk -> pinned host, large O_DIRECT requests
  double disk_write_gbps = 0;  // pinned host -> disk
  // Optional (0: gpu_memory_gbps / 2, each byte read and written). Device -> device copies: the
  // GPU rows of a weight tensor split across tiers, assembled in the layer's weight slot.
  double d2d_gbps = 0;
  // Optional (0: not measured). Pinned host -> disk in single 4 KiB pages at scattered offsets,
  // a queue depth of them per submission: the executor's decode cache writes (one page per KV row
  // and plane). 0 charges those writes as their bytes at disk_write_gbps (FlexGen's model).
  double disk_page_write_gbps = 0;
  // Optional (0: not measured; a GPU's DMA copies take no core and no host memory bandwidth from
  // its GEMMs). The emulated device's copy rate (memcpy, either direction) while its GEMMs
  // stream weights from host memory beside it: both share the memory bus. The cost model charges
  // it to the copies beside a transformer layer whose weights do not fit in gpu_cache_bytes (its
  // GEMMs then stream them).
  double copy_beside_gemm_gbps = 0;
  // Optional (0: none). The read bytes an awaited write submission waits behind while strata's
  // reads stream at their queue depth (its extra time times the read rate): a disk that serves
  // requests in arrival order puts each write behind the reads already on it (the development VM's
  // virtual disk: 4-5 MB of the 8 MiB in flight); one with parallel queues barely delays it. The
  // cost model charges the store lane that wait per disk write, up to the reads its layer has left.
  int64_t disk_write_wait_bytes = 0;

  // GPU compute.
  double gpu_prefill_tflops = 0;            // fp16 GEMM at prefill shapes (many rows)
  double gpu_decode_tflops = 0;             // fp16 GEMM at decode shapes (one row per sequence)
  double gpu_memory_gbps = 0;               // device memory bandwidth: bounds GEMMs from below
                                            // by the weight bytes they read (emulated device:
                                            // the rate the CPU GEMM streams weights at)
  double gpu_attention_prefill_tflops = 0;  // prefill attention (QK^T and AV over the prompt)
  double gpu_attention_gbps = 0;            // decode attention: uncompressed cache bytes (in the
                                            // runtime's activation dtype) read per second
  double gpu_attention_q4_gbps = 0;         // decode attention: 4-bit cache bytes read per second
  double gpu_dequant_gbps = 0;              // 4-bit expansion (weights; quantizing new KV):
                                            // elements per second times 2 (fp16-equivalent bytes)
  // Optional (0: none). The device's last-level cache: a layer's weights that fit in it are read
  // from device memory by the first micro-batch of a layer step only; the later micro-batches
  // find them in the cache (the emulated device's CPU L3; a GPU's L2, which no FlexGen-sized
  // layer fits).
  int64_t gpu_cache_bytes = 0;
  // Optional (empty: gpu_prefill_tflops for the prefill and gpu_decode_tflops for decode and the
  // output layer, whatever the rows). fp16 GEMM TFLOPS by rows per GEMM, rows strictly ascending,
  // as `strata profile` measures it on a GPU at a transformer layer's Linear shapes.
  std::vector<GemmRate> gpu_gemm_tflops_by_rows;

  // CPU.
  int cpu_cores = 0;  // CPU threads the CPU (and emulated device) rates were measured with
  double cpu_memory_gbps = 0;        // host memory read bandwidth, all cores
  double cpu_attention_gbps = 0;     // decode attention, uncompressed cache bytes per second,
                                     // all cores
  double cpu_attention_q4_gbps = 0;  // decode attention, 4-bit cache bytes per second, all cores
                                     // (`strata profile` measures the default format: keys by
                                     // channel, 1.7-2.1x the time of per-token keys on AVX-512)

  // True where a number was measured without a GPU: the device tier was a capacity-limited host
  // arena, its links host memcpy and its compute the CPU (the CPU build's emulated device).
  bool gpu_emulated = false;  // gpu_capacity_bytes and every gpu_* rate
  bool h2d_emulated = false;
  bool d2h_emulated = false;

  // d2d_gbps, or its default.
  double D2dGbps() const { return d2d_gbps > 0 ? d2d_gbps : gpu_memory_gbps / 2; }

  // TFLOPS of a GEMM of `rows` rows in the prefill (prefill) or a decode step. From the curve
  // when there is one: linear in log(rows) between its points; below the first point
  // proportional to rows, first.tflops * rows / first.rows (a GEMM of that few rows is bound by
  // the weight bytes it reads, so its rate grows with its rows); at or above the last point the
  // last point's rate. Without a curve, gpu_prefill_tflops or gpu_decode_tflops by phase.
  // REQUIRES: rows > 0.
  double GemmTflopsAt(double rows, bool prefill) const;

  // Checks every capacity and rate is positive, and the GEMM rate curve's rows positive and
  // strictly ascending and its rates positive; InvalidArgument names the key.
  Status Validate() const;
};

// YAML with one key per field (every key required except description, d2d_gbps,
// disk_page_write_gbps, copy_beside_gemm_gbps, disk_write_wait_bytes, gpu_cache_bytes,
// gpu_gemm_tflops_by_rows and the *_emulated flags, which default to empty, 0, 0, 0, 0, 0, no
// curve and false; a present d2d_gbps, disk_page_write_gbps, copy_beside_gemm_gbps or
// gpu_cache_bytes must be positive, a present disk_write_wait_bytes non-negative).
// gpu_gemm_tflops_by_rows is a map from rows to TFLOPS in any order, e.g.
// `gpu_gemm_tflops_by_rows: {1: 0.9, 16: 14.2, 512: 441.5}`: rows positive whole numbers, each
// once, rates positive; it is stored sorted by rows, and an empty map is no curve. Zero or
// negative capacities or rates, missing or unknown keys, and a document that is not a map are
// errors naming the key and `origin`.
Result<HardwareSpec> ParseHardwareSpecYaml(const std::string& text, const std::string& origin);
Result<HardwareSpec> LoadHardwareSpecYaml(const std::string& path);
std::string HardwareSpecToYaml(const HardwareSpec& spec);

}  // namespace strata
