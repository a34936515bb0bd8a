// Decode attention read straight from the 4-bit KV cache (kernels/kv_q4_format.h): one new query
// token per sequence attends to its whole cached prefix without ever expanding it. Each work item
// is one (sequence, KV head): its K and V rows are read once for all the query heads that share
// them (grouped-query attention), work items run in parallel (OpenMP), and per group the scale and
// minimum are pulled out of the dot products: q·k' = scale·(q·n) + minimum·Σq, where n are the
// codes. Softmax is computed online over tiles of tokens (flash-decoding within a work item);
// with fewer work items than threads, each is split into token ranges of at least 1024 tokens on
// several threads, merged by their log-sum-exp (flash-decoding across threads).
// This is the CPU twin of kernels/cuda's DecodeAttentionQ4 and the CPU-delegation path.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

// Instruction sets of the kernel. kAuto picks the best one the running CPU supports (decided at
// run time with __builtin_cpu_supports, whatever the compiler flags); the others force a path.
// The SIMD paths need head_dim % 64 == 0; other head sizes (below 64, and 80 and 96, whose last
// group is shorter) always run the scalar path. kAvx2 needs AVX2, FMA and F16C; kAvx512 needs
// AVX-512 F, BW, DQ, VL, VBMI and VNNI (Ice Lake, Zen 4 and later).
enum class Q4Isa { kAuto, kScalar, kAvx2, kAvx512 };

// True when `isa` can run on this CPU (kAuto and kScalar always can).
bool Q4IsaAvailable(Q4Isa isa);
// The path kAuto resolves to for `head_dim` on this CPU (never kAuto).
Q4Isa ResolveQ4Isa(Q4Isa isa, int head_dim);
const char* Q4IsaName(Q4Isa isa);

// One layer's quantized keys or values: the two planes of kv_q4_format.h,
// codes [batch, num_kv_heads, max_len, head_dim / 2], params [..., Q4ParamHalves(head_dim)] fp16
// bits (keys by channel: [..., Q4ChannelParamHalves(head_dim)]).
struct Q4CacheView {
  const uint8_t* codes = nullptr;
  const uint16_t* params = nullptr;
};

// Shapes of one decode step over a block of `batch` sequences.
//   q, out: [batch, num_heads, head_dim]; the query token sits at cache slot cache_len - 1,
//   which already holds its own key and value. Sequence b attends slots [start[b], cache_len);
//   a sequence whose query slot lies before start[b] (all padding) gets a zero output. Query
//   head h reads KV head h / (num_heads / num_kv_heads), as in kernels/cpu/attention.h.
struct DecodeAttentionQ4Shape {
  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_len = 0;
  int cache_len = 0;
  float scale = 1.0f;         // applied to q·k, usually 1/sqrt(head_dim)
  bool keys_rotated = false;  // keys were written Walsh–Hadamard rotated (hadamard.h); the kernel
                              // rotates each query the same way before its dot products
  bool keys_by_channel = false;  // keys are in the keys-by-channel layout (kv_q4_channel.h):
                                 // each group's channel scales go into the query, its minimums
                                 // into one score offset; needs exact rows with a window of at
                                 // least kQ4ChannelGroup tokens (the unfinished group)
};

// Tokens of each sequence kept exact next to the 4-bit cache (kernels/cpu/kv_q4_exact.h): its
// first `sink` real tokens and its `window` most recent ones, as fp32 rows
// [batch, num_kv_heads, sink + window, head_dim] for keys and again for values (keys in the
// space the 4-bit keys are in: smoothed and rotated like them, not quantized). Token i of a
// sequence (slot start[b] + i) sits at row i when i < sink, and at row sink + i % window
// otherwise. With sink + window > 0, decode attention reads those tokens from these rows and only
// the others from the 4-bit planes, merging both by their log-sum-exp.
struct Q4ExactRows {
  int sink = 0;
  int window = 0;
  const float* keys = nullptr;
  const float* values = nullptr;
};

// REQUIRES: head_dim valid for the format (and a power of two when keys_rotated); num_heads a
// multiple of num_kv_heads; 1 <= cache_len <= max_len; 0 <= start[b]. `isa` must be available.
// `exact`, when given, holds rows for every exact token below cache_len (the query's included).
// Thread-safe; uses the OpenMP thread count (kernels/cpu/threads.h).
void DecodeAttentionQ4(const DecodeAttentionQ4Shape& s, const float* q, Q4CacheView k,
                       Q4CacheView v, const int* start, float* out, Q4Isa isa = Q4Isa::kAuto,
                       const Q4ExactRows* exact = nullptr);

}  // namespace strata::kernels::cpu
