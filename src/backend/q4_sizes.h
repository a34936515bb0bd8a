// Sizes of the 4-bit formats the backends read and write: the KV cache (kernels/kv_q4_format.h)
// and weights (kernels/cpu/weight_q4.h). Code above src/backend allocates, places and moves these
// bytes by these figures and never reads them.
#pragma once

#include <cstdint>

namespace strata {

// Tokens per key group of the keys-by-channel cache layout.
inline constexpr int kKvQ4ChannelGroup = 32;

// Bytes of codes, and fp16 values of params, of one token of one KV head: values (and keys
// quantized per token), and keys by channel (a group's params spread over its slots).
int KvQ4CodeBytes(int head_dim);
int KvQ4ParamHalves(int head_dim);
int KvQ4ChannelParamHalves(int head_dim);

// Weights: codes bytes and fp16 param values of a [rows, cols] matrix in groups of `group`
// columns, the group the backends use by default, and whether `cols` can take it.
inline constexpr int kWeightQ4Group = 64;
int64_t WeightQ4CodeBytes(int64_t rows, int64_t cols);
int64_t WeightQ4ParamHalves(int64_t rows, int64_t cols, int group);
bool WeightQ4Supports(int64_t cols, int group);

}  // namespace strata
