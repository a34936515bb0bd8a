// Plain-data parameter types of the default 4-bit cache's CUDA kernels (attention_decode_q4c.cuh
// and kv_q4_channel.cuh): the table of rows they read and write, the decode shape and its plan.
// Host-only C++ (the CUDA backend, tests/backend, bench/) names them through this header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cuda {

// True when the default-format kernels (attention_decode_q4c.cuh and kv_q4_channel.cuh) support
// head_dim: 64, 80, 96, 128 and 256 (80 and 96 with a shorter last value group and padded code
// chunks, kernels/kv_q4_format.h).
constexpr bool Q4ChannelHeadDimSupported(int head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

// One (sequence, KV head) row of the default 4-bit cache (kernels/kv_q4_format.h, "Keys by
// channel"), wherever the engine keeps it: all pointers are device memory, each plane holds
// `stride` slots of that row from slot 0.
//   k_codes, v_codes: [stride, head_dim / 2] bytes, 16-byte aligned;
//   k_params: [stride, Q4ChannelParamHalves(head_dim)] fp16 bits (a group's {scale, minimum} per
//             channel spread over its 32 slots), 8-byte aligned;
//   v_params: [stride, Q4ParamHalves(head_dim)] fp16 bits, 4-byte aligned;
//   k_exact, v_exact: [sink + window, head_dim] fp32, the exact rows (kernels/cpu/kv_q4_exact.h:
//             token i at row i when i < sink, else at row sink + i % window), 16-byte aligned.
struct Q4ChannelRow {
  uint8_t* k_codes = nullptr;
  uint16_t* k_params = nullptr;
  uint8_t* v_codes = nullptr;
  uint16_t* v_params = nullptr;
  float* k_exact = nullptr;
  float* v_exact = nullptr;
  int stride = 0;
  int reserved = 0;
};

// One decode step over `batch` sequences whose rows are rows[b * num_kv_heads + h].
//   q, out: [batch, num_heads, head_dim] fp32; the query token sits at slot cache_len - 1, which
//   already holds its own key and value (and its exact rows). Sequence b attends slots
//   [start[b], cache_len); one with nothing to attend gets a zero output. Query head h reads KV
//   head h / (num_heads / num_kv_heads). Tokens i < sink and the last `window` tokens are read
//   from the exact rows, the others from the 4-bit planes, merged by their log-sum-exp.
struct Q4ChannelDecodeShape {
  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_len = 0;    // the most slots any row's attention may reach (the plan's bound)
  int cache_len = 0;  // <= max_len and <= every attended row's stride
  int sink = 0;
  int window = 0;             // >= kQ4ChannelGroup (an unfinished key group is read exact)
  float scale = 1.0f;         // applied to q·k, usually 1/sqrt(head_dim)
  bool keys_rotated = false;  // keys (and exact keys) were stored Walsh–Hadamard rotated
};

// Host-side plan for one shape, made once and replayed every step while cache_len <= max_len.
struct Q4ChannelDecodePlan {
  int num_splits = 1;          // blocks over the 4-bit tokens per (sequence, KV head, head tile)
  size_t workspace_bytes = 0;  // device scratch for the partial outputs (0 when not needed)
};

}  // namespace strata::kernels::cuda
