// The 4-bit KV cache format, shared by the CPU and CUDA kernels (FlexGen's scheme as baseline).
//
// Quantization is asymmetric and group-wise along head_dim: the groups are consecutive runs of
// G = Q4Group(head_dim) = min(64, head_dim) elements of one token's key (or value) vector for one
// KV head, the last one shorter (head_dim % 64 elements) when 64 does not divide head_dim. Per
// group of g elements:
//   lo = min(x), hi = max(x)
//   scale = fp16((hi - lo) / 15), minimum = fp16(lo)        (both rounded to fp16 first)
//   q[i] = clamp(round((x[i] - float(minimum)) / float(scale)), 0, 15), or 0 when scale == 0
//   x'[i] = q[i] * float(scale) + float(minimum)             (what every reader computes)
// so the dequantization the reader performs is exactly the one the writer assumed.
//
// Storage is two planes, so that codes stream contiguously and stay 16-byte aligned:
//   codes  [batch, kv_heads, max_len, head_dim / 2] bytes; group i starts at byte 32i and its
//          byte j (0..g/2-1) holds element 64i + j in its low nibble and element 64i + g/2 + j
//          in its high nibble, so for g = 64 one 32-byte load gives 32 consecutive elements from
//          the low nibbles and the next 32 from the high nibbles.
//   params [batch, kv_heads, max_len, Q4ParamHalves(head_dim)] fp16: {scale, minimum} per group.
// REQUIRES: head_dim is even and, when above 64, a multiple of 64, or 80 or 96 (a last group of
// 16 or 32). The CPU kernels take them all (at 80 and 96 decode attention runs its scalar path);
// the CUDA kernels take 64, 80, 96, 128 and 256 with keys by channel.
//
// Keys by channel (the `channel` key mode, KIVI's layout for keys): keys are quantized per
// channel over groups of C = kQ4ChannelGroup consecutive tokens of a sequence (tokens g*C to
// g*C + C - 1, counted from its first real slot, so that padding never moves a group) instead
// of per token over channels. The codes plane is unchanged (same nibble order per token); the
// key params plane has Q4ChannelParamHalves(head_dim) halves per slot, and group g's params are
// {scale, minimum} of each channel c at halves [2c, 2c + 1] of the params its C slots hold
// together; the halves past 2 * head_dim (at head_dim 80: an even count per slot keeps each
// group's params 4-byte aligned) are zero. Per channel, lo and hi are taken over the group's
// fitted tokens (not exact sink tokens, whose codes are 0) and the codes follow the rule above.
// A group is written once, when its last token is; until then its tokens are read from the exact
// window, which must hold at least C tokens.
#pragma once

// The helpers below run on the host and, compiled by nvcc, in device code too.
#if defined(__CUDACC__)
#define STRATA_Q4_HD __host__ __device__
#else
#define STRATA_Q4_HD
#endif

namespace strata::kernels {

inline constexpr int kQ4MaxGroup = 64;
// Tokens per key group of the keys-by-channel layout.
inline constexpr int kQ4ChannelGroup = 32;

STRATA_Q4_HD constexpr int Q4Group(int head_dim) { return head_dim < kQ4MaxGroup ? head_dim : kQ4MaxGroup; }
// Groups of one token's vector, and the elements of group i (which starts at element 64i and
// code byte 32i): Q4Group(head_dim), but head_dim % 64 for the last group when 64 does not
// divide a head_dim above 64. REQUIRES: 0 <= i < Q4Groups(head_dim).
STRATA_Q4_HD constexpr int Q4Groups(int head_dim) {
  return (head_dim + kQ4MaxGroup - 1) / kQ4MaxGroup;
}
STRATA_Q4_HD constexpr int Q4GroupSize(int head_dim, int i) {
  return head_dim - i * kQ4MaxGroup < kQ4MaxGroup ? head_dim - i * kQ4MaxGroup : kQ4MaxGroup;
}
// Bytes of codes, and fp16 values of params, for one token of one KV head.
STRATA_Q4_HD constexpr int Q4CodeBytes(int head_dim) { return head_dim / 2; }
STRATA_Q4_HD constexpr int Q4ParamHalves(int head_dim) { return 2 * Q4Groups(head_dim); }
// fp16 values of the key params plane per slot in the keys-by-channel layout: a group's
// 2 * head_dim spread over its slots (4 at head_dim 64, against 2 per token otherwise), an even
// count above head_dim 64.
STRATA_Q4_HD constexpr int Q4ChannelParamHalves(int head_dim) {
  return head_dim > kQ4MaxGroup ? 2 * ((head_dim + 31) / 32)
                                : (2 * head_dim + kQ4ChannelGroup - 1) / kQ4ChannelGroup;
}

}  // namespace strata::kernels
