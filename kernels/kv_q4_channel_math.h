// The arithmetic of decode attention over the default 4-bit cache (kernels/kv_q4_format.h, "Keys
// by channel"), as __host__ __device__ functions: kernels/cuda/attention_decode_q4c.cuh runs them
// on the GPU and tests/kernels/kv_q4_channel_math_test.cc proves them against fp64 on the CPU.
//
//   - Nibble unpack by the fp16 magic number: a nibble OR-ed into the mantissa of 1024.0 (0x6400)
//     is the fp16 number 1024 + n exactly; subtracting 1024 leaves n, with no int-to-float convert.
//   - Which channel each nibble holds, and which channels a lane's MMA fragments cover.
//   - Key scale folding: within one group of kQ4ChannelGroup tokens every key is
//     k[c] = n[c]·scale[c] + minimum[c], so q·k = Σ (q[c]·scale[c])·n[c] + Σ q[c]·minimum[c]:
//     the query is multiplied by the group's scales once (the MMA then sees only the codes) and
//     the minimums make one score bias per (head, group). The query is split once into fp16
//     hi + lo, so that both run on fp16 operands: q·scale by HMUL2 + HFMA2, the bias by MMAs of
//     the minimums against hi and lo.
//   - The log-sum-exp merge of partial softmax results (log2 units, as the kernels use exp2).
//   - The shared-memory swizzle of code rows, and the host's wave model for the split count.
#pragma once

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include <cmath>
#include <cstdint>

#include "kernels/cpu/half.h"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::q4c {

// ---- fp16 bits, exact: conversion instructions on the device, kernels/cpu/half.h on the host ----

STRATA_Q4_HD inline float HalfBitsToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return cpu::HalfBitsToFloat(h);
#endif
}

// Round to nearest even (as __float2half_rn and F16C).
STRATA_Q4_HD inline uint16_t FloatToHalfBits(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return cpu::FloatToHalfBits(f);
#endif
}

// ---- unpack ----

// The nibbles at bits [shift, shift + 4) and [shift + 16, shift + 20) of w as the fp16 pair
// {1024 + n_lo, 1024 + n_hi} (n_lo in the low 16 bits). One LOP3 on the device.
STRATA_Q4_HD constexpr uint32_t NibblePairPlus1024(uint32_t w, int shift) {
  return ((w >> shift) & 0x000F000Fu) | 0x64006400u;
}

// The same nibbles, for shift >= 4, as {1024 + 16·n_lo, 1024 + 16·n_hi}: masked one nibble above
// their place, so that a word's four nibble pairs cost one shift instead of three (shift 4 needs
// none, shifts 8 and 12 share w >> 8). Subtracting 1024 leaves 16·n exactly; the value scale
// carries the 1/16 (exact for fp16 scales of at least 2^-10, within 2^-25 below).
STRATA_Q4_HD constexpr uint32_t NibblePairTimes16Plus1024(uint32_t w, int shift) {
  return ((w >> (shift - 4)) & 0x00F000F0u) | 0x64006400u;
}

// 16-byte chunks of a token's code row as the CUDA kernels keep it in shared memory: head_dim / 32
// rounded up (at head_dim 80 the last chunk's bytes 40..47 are padding).
STRATA_Q4_HD constexpr int CodeChunks(int head_dim) { return (head_dim + 31) / 32; }

// The channel that byte `byte` of a token's codes holds in its low (high = 0) or high nibble
// (kernels/kv_q4_format.h: groups of 64, the last one shorter). A padding byte of the last chunk
// (byte >= head_dim / 2) maps to the channels head_dim .. 32 * CodeChunks(head_dim) - 1, its low
// nibbles first, so that the fragment maps below stay permutations of whole chunks.
STRATA_Q4_HD constexpr int ChannelOfNibble(int byte, int high, int head_dim) {
  if (head_dim <= kQ4MaxGroup || head_dim % kQ4MaxGroup == 0) {  // groups of one size
    const int g = Q4Group(head_dim);
    const int half = g / 2;
    return byte / half * g + byte % half + (high != 0 ? half : 0);
  }
  const int bytes = head_dim / 2;
  if (byte >= bytes) {
    return head_dim + (byte - bytes) + (high != 0 ? 16 * CodeChunks(head_dim) - bytes : 0);
  }
  const int group = byte / 32;
  const int half = (group == head_dim / 64 ? head_dim % 64 : 64) / 2;
  return 64 * group + byte % 32 + (high != 0 ? half : 0);
}

// Keys on the tensor cores: lane (g, t) of a warp holds word t of each 16-byte chunk c of its
// tokens' code rows (ldmatrix), so in the k-step of (chunk c, nibble half `high`) its fragment
// slots k = 0..3 (MMA k-indices 2t, 2t+8, 2t+1, 2t+9) are channels KeyChannel(c, t, k, high) and
// the query fragment is built from the same channels (zero past head_dim: padding).
// REQUIRES: chunk < CodeChunks(head_dim).
STRATA_Q4_HD constexpr int KeyChannel(int chunk, int t, int k, int high, int head_dim) {
  return ChannelOfNibble(16 * chunk + 4 * t + k, high, head_dim);
}

// Values on the tensor cores, transposed (O^T = V^T P^T): lane (g, t) receives b16 element g of
// chunk c of token pairs (ldmatrix.trans), so m-tile 2c + p has as row g the low nibble and as
// row g + 8 the high nibble of byte 16c + 2g + p. The output dimension of (m-tile, row); one at or
// past head_dim is padding, not an output.
STRATA_Q4_HD constexpr int ValueDim(int m_tile, int upper, int g, int head_dim) {
  return ChannelOfNibble(16 * (m_tile / 2) + 2 * g + m_tile % 2, upper, head_dim);
}

// ---- key scale folding ----

// Round to nearest even of a double to fp16 bits, on the host: one rounding of an fp16 multiply or
// FMA (whose exact result a double holds when its inputs are fp16 numbers), for the host side of
// the split fold below. Subnormals kept, overflow to infinity.
inline uint16_t RoundToHalfBits(double x) {
  if (std::isnan(x)) return 0x7E00u;
  const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1)
  const int binade = e - 1 < -14 ? -14 : e - 1;
  const double ulp = std::ldexp(1.0, binade - 10);
  const double r = std::nearbyint(a / ulp) * ulp;  // ties to even (the default rounding mode)
  if (r > 65504.0) return sign | 0x7C00u;
  return sign | FloatToHalfBits(static_cast<float>(r));  // r is an fp16 number: exact
}

// The query as two fp16 numbers, q = hi + lo to within 2^-22·|q| (+ 2^-25 when lo is subnormal):
// hi = fp16(q), lo = fp16(q - hi) (q - hi is exact in fp32). Split once per block, so that the
// tile loop folds scales (FoldKeyPairSplit) and minimums (an MMA of the minimums against hi and
// lo) on fp16 operands only. REQUIRES: |q| < 65504.
STRATA_Q4_HD inline void SplitQueryHalf(float q, uint16_t& hi, uint16_t& lo) {
  hi = FloatToHalfBits(q);
  lo = FloatToHalfBits(q - HalfBitsToFloat(hi));
}

// Two channels of the split fold, each half of the words one channel: fp16(hi·scale +
// fp16(lo·scale)), one HMUL2 and one HFMA2 on the device, within 2^-11·(1 + 2^-10) of q·scale
// relative (+ scale·2^-25 + 2^-24 absolute near the subnormals): about one rounding of q·scale,
// with no conversion. With kSixteenth the result is then divided by 16 (one more HMUL2, exact
// unless the quotient is subnormal): the fold for the codes unpacked as 16·n.
template <bool kSixteenth>
STRATA_Q4_HD inline uint32_t FoldKeyPairSplit(uint32_t hi, uint32_t lo, uint32_t scale) {
#if defined(__CUDA_ARCH__)
  const __half2 h = *reinterpret_cast<const __half2*>(&hi);
  const __half2 l = *reinterpret_cast<const __half2*>(&lo);
  const __half2 s = *reinterpret_cast<const __half2*>(&scale);
  __half2 r = __hfma2(h, s, __hmul2_rn(l, s));
  if constexpr (kSixteenth) r = __hmul2_rn(r, __half2half2(__ushort_as_half(0x2C00u)));
  return *reinterpret_cast<const uint32_t*>(&r);
#else
  uint32_t out = 0;
  for (int k = 0; k < 2; ++k) {
    const double s = HalfBitsToFloat(static_cast<uint16_t>(scale >> (16 * k)));
    const double h = HalfBitsToFloat(static_cast<uint16_t>(hi >> (16 * k)));
    const double l = HalfBitsToFloat(static_cast<uint16_t>(lo >> (16 * k)));
    const double low = HalfBitsToFloat(RoundToHalfBits(l * s));
    uint16_t r = RoundToHalfBits(h * s + low);
    if (kSixteenth) r = RoundToHalfBits(HalfBitsToFloat(r) / 16.0);
    out |= static_cast<uint32_t>(r) << (16 * k);
  }
  return out;
#endif
}

// ---- log-sum-exp merge (log2 units) ----

// A running softmax over some scores s (already in log2 units): max m and l = Σ 2^(s - m).
struct SoftmaxRun {
  float m = -INFINITY;
  float l = 0.0f;
};

// Takes in a block of scores whose max is `block_max`; returns the factor by which everything
// accumulated so far (l and the weighted outputs) must be scaled, and sets `use` to the new
// reference (0 when nothing finite was seen, so that inf - inf never happens).
STRATA_Q4_HD inline float OnlineRescale(SoftmaxRun& run, float block_max, float& use) {
  const float m_new = fmaxf(run.m, block_max);
  use = m_new == -INFINITY ? 0.0f : m_new;
  const float alpha = exp2f(run.m - use);
  run.m = m_new;
  run.l *= alpha;
  return alpha;
}

// log2 Σ 2^s of a finished run; -inf when it saw nothing.
STRATA_Q4_HD inline float RunLse(const SoftmaxRun& run) {
  return run.l > 0.0f ? run.m + log2f(run.l) : -INFINITY;
}

// One element of the merge of `parts` normalised partial outputs x[i * stride] with their
// log-sum-exps lse[i]: Σ 2^(lse_i - M) x_i / Σ 2^(lse_i - M), M the largest; 0 when all are
// empty (-inf).
STRATA_Q4_HD inline float MergeParts(const float* lse, const float* x, int parts, long stride) {
  float top = -INFINITY;
  for (int i = 0; i < parts; ++i) top = fmaxf(top, lse[i]);
  if (top == -INFINITY) return 0.0f;
  float acc = 0.0f, weight = 0.0f;
  for (int i = 0; i < parts; ++i) {
    if (lse[i] == -INFINITY) continue;
    const float f = exp2f(lse[i] - top);
    acc = fmaf(f, x[i * stride], acc);
    weight += f;
  }
  return acc / weight;
}

// ---- layout ----

// Where 16-byte chunk `chunk` of token `token`'s code row sits in a shared-memory tile (rows of
// chunks_per_row chunks, back to back): XOR-swizzled so that the eight rows one ldmatrix phase
// reads at the same chunk fall into eight different 16-byte bank groups. Rows of an odd number of
// chunks already do (row r starts at bank group chunks_per_row * r mod 8), so those stay in place.
// REQUIRES: chunks_per_row in {2, 4, 8} or odd.
STRATA_Q4_HD constexpr int SwizzledChunk(int token, int chunk, int chunks_per_row) {
  if (chunks_per_row % 2 != 0) return chunk;
  return chunk ^ ((token / (8 / chunks_per_row)) % chunks_per_row);
}

// The split count of the wave model: the fewest splits (1..most) whose blocks fill their last wave
// to >= 95% of `resident` block slots, else the one filling it best. `base` blocks per split.
inline int PlanSplitsByWaves(long base, long resident, long most) {
  if (base <= 0 || resident <= 0) return 1;
  long splits = 1;
  double best = 0.0;
  for (long sp = 1; sp <= most; ++sp) {
    const long blocks = base * sp;
    const long waves = (blocks + resident - 1) / resident;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * resident);
    if (fill > best + 1e-9) {
      best = fill;
      splits = sp;
    }
    if (fill >= 0.95) break;
  }
  return static_cast<int>(splits);
}

}  // namespace strata::kernels::q4c
