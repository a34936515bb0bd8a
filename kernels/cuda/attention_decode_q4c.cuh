// Decode attention over the default 4-bit cache (kernels/kv_q4_format.h, "Keys by channel": keys
// quantized per channel over groups of 32 tokens, values per token, the first `sink` and the last
// `window` tokens exact in fp32 rows). CUDA twin of kernels/cpu/attention_q4.h with
// keys_by_channel and Q4ExactRows; rows are found through a table (Q4ChannelRow), so the engine
// may keep each (sequence, KV head) row wherever its tier puts it.
//
// Work partitioning (flash-decoding). A block owns one (sequence, KV head, head tile of up to 8
// query heads) and one split: a contiguous run of the row's 32-token tiles (tile k = slots
// start + 32k ... + 31, exactly one key group); the last split also attends the exact rows, so no
// block is left holding a slot for a few fp32 rows. Its 4 warps take the run's tiles round-robin,
// each with its own online softmax, and merge through shared memory; with several splits every
// split writes a normalised partial output and its log-sum-exp (log2 units) and
// MergeQ4ChannelPartsKernel combines them, with one split the block writes the output itself.
// The split count is planned on the host by a wave model over the resident blocks.
//
// Each warp streams its tiles through its own ring of kStages shared-memory stages with cp.async
// (codes, the group's key parameters and the tokens' value parameters of one tile per stage),
// kStages - 1 tiles ahead of the one it computes; the stages are few so that many warps stay
// resident (see Layout). Rows outside the attended 4-bit range are zero-filled, never read. Code
// rows are XOR-swizzled (SwizzledChunk) so that ldmatrix reads them without bank conflicts; the
// 3-chunk rows of head_dim 80 and 96 need no swizzle.
//
// Tensor cores, transposed, as attention_decode.cuh: S^T[32 tokens, 8 heads] = N[32, d] Q'^T and
// O^T[d, 8 heads] += V^T[d, 32] P^T. Per tile (= key group) each lane folds the group's channel
// scales into its slice of the query once, Q' = fp16(q · scale) from the query split once per
// block into fp16 hi + lo (one HMUL2 and one HFMA2 a channel pair, no conversions), and the
// minimums into one score bias per head, Σ q · minimum, by MMAs of the minimums against hi and lo
// (kernels/kv_q4_channel_math.h), so the key MMA multiplies the exact codes (nibbles unpacked by
// the 0x6400 magic number; the high nibbles as 16·n against Q' / 16). Values are dequantized in
// fp16 with one HFMA2 per two elements, as in attention_decode.cuh: folding the value scale into
// P would let P · scale underflow fp16. Exact rows are attended in fp32 on the CUDA cores.
//
// Precision: Q', P and dequantized V are fp16 MMA operands with fp32 accumulation: a normalised
// error of order 1e-3 against the CPU kernel.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/decode_q4c_params.h"
#include "kernels/cuda/utils.cuh"
#include "kernels/kv_q4_channel_math.h"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::cuda {

// Runs the body with kHeadDim a constant for each head size the default-format kernels support
// (Q4ChannelHeadDimSupported); any other size makes the enclosing launcher return
// cudaErrorInvalidValue.
#define STRATA_DISPATCH_Q4C_HEAD_DIM(head_dim, kHeadDim, ...) \
  switch (head_dim) {                                         \
    case 64: {                                                \
      constexpr int kHeadDim = 64;                            \
      __VA_ARGS__                                             \
      break;                                                  \
    }                                                         \
    case 80: {                                                \
      constexpr int kHeadDim = 80;                            \
      __VA_ARGS__                                             \
      break;                                                  \
    }                                                         \
    case 96: {                                                \
      constexpr int kHeadDim = 96;                            \
      __VA_ARGS__                                             \
      break;                                                  \
    }                                                         \
    case 128: {                                               \
      constexpr int kHeadDim = 128;                           \
      __VA_ARGS__                                             \
      break;                                                  \
    }                                                         \
    case 256: {                                               \
      constexpr int kHeadDim = 256;                           \
      __VA_ARGS__                                             \
      break;                                                  \
    }                                                         \
    default:                                                  \
      return cudaErrorInvalidValue;                           \
  }

namespace decode_q4c {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kTile = kQ4ChannelGroup;  // tokens per tile: one key group
inline constexpr int kHeadsPerTile = 8;
// Fewest tiles one split gets: two per warp, so that merging stays a small share of the traffic.
inline constexpr int kMinTilesPerSplit = 2 * kWarps;
inline constexpr int kMaxSplits = 256;
inline constexpr float kLog2e = 1.4426950408889634f;

// Shared memory of one block, in bytes. Per warp, kStages stages of one tile each:
//   K codes [32][P/2] and V codes [32][P/2] (swizzled 16-byte chunks), the group's key params
//   [P][2] fp16, the tokens' value params [32][ceil(d/64)][2] fp16, with P = 32·CodeChunks(d):
//   38·d bytes a stage at head_dim 64, 128 and 256, 3,712 at 80 and 96. At 80 (P = 96) each
//   code row keeps 8 padding bytes and the key params 16 zero channels (kernels/kv_q4_format.h),
//   which the zero query ignores.
// After the loop the stages are reused for the outputs of kOutSlots partial softmax runs: the
// warps' quantized runs, then (last split only) their exact-row runs.
//
// The kernel is issue-bound, not latency-bound (H100, 2026-11-27: 4 stages at head_dim 128 held
// 2 blocks, 8 warps an SM, which kept the DRAM 63% busy while waiting on their own instruction
// chains): few stages and more resident warps. One tile ahead per warp is enough once 16 warps
// share an SM, since each warp then computes a tile in several µs, past the DRAM latency.
// kMinBlocks caps the registers (__launch_bounds__) so that the shared memory is the only limit
// (head_dim 64: 5 blocks, 96 registers; at 6 the 80-register cap spills).
template <int kHeadDim>
struct Layout {
  static constexpr int kRowBytes = kHeadDim / 2;               // a code row in global memory
  static constexpr int kChunks = q4c::CodeChunks(kHeadDim);    // 16-byte chunks per code row
  static constexpr int kPadDim = 32 * kChunks;                 // channels the fragments cover
  static constexpr int kSmemRowBytes = 16 * kChunks;           // a code row in shared memory
  static constexpr int kGroups = (kHeadDim + 63) / 64;         // value groups per token
  static constexpr int kMTiles = 2 * kChunks;
  // Code rows are copied 16 bytes at a time, or 8 at head_dim 80 (40-byte rows); the group's key
  // params (4·P bytes at a slot's 4-byte aligned place) in the widest unit that divides a slot's.
  static constexpr int kCodeCopy = kRowBytes % 16 == 0 ? 16 : 8;
  static constexpr int kKParamSlotBytes = 2 * Q4ChannelParamHalves(kHeadDim);
  static constexpr int kKParamCopy =
      kKParamSlotBytes % 16 == 0 ? 16 : (kKParamSlotBytes % 8 == 0 ? 8 : 4);
  static constexpr int kStages = kHeadDim >= 128 ? 2 : 3;
  static constexpr int kMinBlocks = kHeadDim == 64 ? 5 : (kHeadDim <= 128 ? 4 : 2);
  static constexpr int kOutSlots = 2 * kWarps;
  static constexpr int kKCodes = 0;
  static constexpr int kVCodes = kTile * kSmemRowBytes;
  static constexpr int kKParams = 2 * kTile * kSmemRowBytes;
  static constexpr int kVParams = kKParams + 4 * kPadDim;
  static constexpr int kStageBytes = kVParams + kTile * kGroups * 4;
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  // Floats a head. The fold's float4 reads put heads g and g + 1 in one 8-lane phase at channels
  // 4t: a 16-float pad moves the next head 16 banks on, so that the phase is conflict-free.
  static constexpr int kQStride = kHeadDim + 16;
  static constexpr int kQOffset = kPipeBytes;
  // The queries split into fp16 hi + lo pairs in the key fragments' order, [chunk][nibble half]
  // [head][t] of 16 bytes {hi k 2t..2t+1, hi k 2t+8..2t+9, lo .., lo ..}: one conflict-free
  // 16-byte read a lane and k-step (the 8 lanes of a phase read 128 consecutive bytes).
  static constexpr int kQSplitOffset = kQOffset + kHeadsPerTile * kQStride * 4;
  static constexpr int kStatsOffset = kQSplitOffset + kChunks * 2 * kHeadsPerTile * 4 * 16;
  static constexpr int kSmemBytes = kStatsOffset + 2 * kOutSlots * kHeadsPerTile * 4;
  static_assert(kOutSlots * kHeadsPerTile * kHeadDim * 4 <= kPipeBytes, "outputs alias the stages");
  static_assert(kStageBytes % 16 == 0, "stages stay 16-byte aligned");
  static_assert(kTile * kKParamSlotBytes == 4 * kPadDim, "a group's key params fill their slots");
  static_assert(4 * kPadDim / kKParamCopy % 32 == 0, "every lane copies as many param units");
};

struct Params {
  Q4ChannelDecodeShape s;
  const float* q = nullptr;
  const int* start = nullptr;
  const Q4ChannelRow* rows = nullptr;
  float* out = nullptr;
  int num_splits = 1;
  int parts = 1;  // = num_splits; the last split also attends the exact rows
  int head_tiles = 1;
  float* partial_out = nullptr;  // [batch * num_heads, parts, head_dim]; unused for one part
  float* partial_lse = nullptr;  // [batch * num_heads, parts], log2 units
};

// ---- kernels ----

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies kBytes from global to shared memory asynchronously; with ok == false the destination is
// zero-filled and nothing is read.
template <int kBytes>
__device__ __forceinline__ void CpAsync(void* dst, const void* src, bool ok) {
  const int src_bytes = ok ? kBytes : 0;
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(SmemAddr(dst)), "l"(src),
                 "n"(kBytes), "r"(src_bytes)
                 : "memory");
  }
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p))
               : "memory");
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p))
               : "memory");
}

// The exact fp16 pair {n_lo, n_hi} of the nibbles at kShift and kShift + 16.
template <int kShift>
__device__ __forceinline__ __half2 Codes(uint32_t w) {
  return __hsub2(Half2FromBits(q4c::NibblePairPlus1024(w, kShift)), Half2FromBits(0x64006400u));
}
// The same times 16, for the high nibbles (kShift 4 and 12) of the values, whose scale is taken
// / 16, and of the keys, whose folded query is: one shift a word instead of three.
template <int kShift>
__device__ __forceinline__ __half2 Codes16(uint32_t w) {
  return __hsub2(Half2FromBits(q4c::NibblePairTimes16Plus1024(w, kShift)),
                 Half2FromBits(0x64006400u));
}

// 2^x for x <= 0 on the special-function unit alone (exp2f adds the fix-ups of subnormal
// results, which become fp16 zeros here anyway); 2^-inf = 0.
__device__ __forceinline__ float Exp2Ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The 4-bit tiles [split's run) of one row: each warp's loads, folds, MMAs and online softmax.
// Leaves the warp's max, denominator and unnormalised output in s_m / s_l / s_o (heads 2t, 2t+1).
template <int kHeadDim>
__device__ __forceinline__ void AttendQuantized(const Params& p, const Q4ChannelRow& row,
                                                const uint4* s_qs, uint8_t* smem, float* s_m,
                                                float* s_l, int first, int quant_lo, int quant_hi) {
  using L = Layout<kHeadDim>;
  constexpr int kChunks = L::kChunks;
  constexpr int kGroups = L::kGroups;
  constexpr int kStages = L::kStages;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;

  const int tile_lo = (quant_lo - first) / kTile;
  const int n_tiles = quant_hi > quant_lo ? (quant_hi - first + kTile - 1) / kTile - tile_lo : 0;
  const int per_split = (n_tiles + p.num_splits - 1) / p.num_splits;
  const int split_begin = tile_lo + static_cast<int>(blockIdx.x) * per_split;
  const int split_end = min(split_begin + per_split, tile_lo + n_tiles);
  const int my_first = split_begin + warp;
  const int my_count = split_end > my_first ? (split_end - my_first + kWarps - 1) / kWarps : 0;
  uint8_t* const ring = smem + warp * kStages * L::kStageBytes;
  const uint8_t* const k_params = reinterpret_cast<const uint8_t*>(row.k_params);
  const uint8_t* const v_params = reinterpret_cast<const uint8_t*>(row.v_params);

  auto load = [&](int i) {
    constexpr int kUnits = L::kRowBytes / L::kCodeCopy;  // copy units per code row
    const int slot0 = first + (my_first + i * kWarps) * kTile;
    uint8_t* st = ring + (i % kStages) * L::kStageBytes;
#pragma unroll
    for (int it = 0; it < kUnits; ++it) {
      const int idx = it * 32 + lane;
      const int j = idx / kUnits;
      const int at = idx % kUnits * L::kCodeCopy;  // byte in the row
      const int slot = slot0 + j;
      const bool ok = slot >= quant_lo && slot < quant_hi;
      const int64_t off = ok ? static_cast<int64_t>(slot) * L::kRowBytes + at : 0;
      const int dst =
          j * L::kSmemRowBytes + 16 * q4c::SwizzledChunk(j, at / 16, kChunks) + at % 16;
      CpAsync<L::kCodeCopy>(st + L::kKCodes + dst, row.k_codes + off, ok);
      CpAsync<L::kCodeCopy>(st + L::kVCodes + dst, row.v_codes + off, ok);
    }
    // The group's key params: 4·P bytes from slot0's.
    const uint8_t* kp = k_params + static_cast<int64_t>(slot0) * L::kKParamSlotBytes;
#pragma unroll
    for (int it = 0; it < 4 * L::kPadDim / L::kKParamCopy / 32; ++it) {
      const int at = L::kKParamCopy * (it * 32 + lane);
      CpAsync<L::kKParamCopy>(st + L::kKParams + at, kp + at, true);
    }
    // Value params: token `lane` of the tile.
    const int slot = slot0 + lane;
    const bool ok = slot >= quant_lo && slot < quant_hi;
    CpAsync<kGroups * 4>(st + L::kVParams + lane * kGroups * 4,
                         v_params + (ok ? static_cast<int64_t>(slot) * kGroups * 4 : 0), ok);
  };

  q4c::SoftmaxRun run[2];  // heads 2t, 2t + 1, the same in the 8 lanes that share t
  float o[L::kMTiles][4];
#pragma unroll
  for (int m = 0; m < L::kMTiles; ++m) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[m][i] = 0.0f;
  }

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < my_count) load(st);
    CpAsyncCommit();
  }
  for (int i = 0; i < my_count; ++i) {
    __syncwarp();  // every lane is done with the stage the next load overwrites
    if (i + kStages - 1 < my_count) load(i + kStages - 1);
    CpAsyncCommit();
    CpAsyncWait<kStages - 1>();
    __syncwarp();  // every lane's copies of tile i are visible
    const uint8_t* st = ring + (i % kStages) * L::kStageBytes;
    const int slot0 = first + (my_first + i * kWarps) * kTile;

    // Scores, a pair of 16-byte code chunks (one ldmatrix a m-tile) at a time, both m-tiles
    // interleaved: acc[mt] = (token 16mt + g, head 2t), (.., 2t + 1), (token 16mt + g + 8, 2t),
    // (.., 2t + 1). Per chunk the group's scales are folded into this lane's query slice (head g):
    // fp16(q·scale) from the query's fp16 hi + lo (q4c::FoldKeyPairSplit, no conversions), divided
    // by 16 for the high nibbles, which are unpacked as 16·n (one shift a code word instead of
    // three). The minimums make the bias Σ q·minimum on the tensor cores: an A whose every row is
    // the minimums, against the query's hi and lo (fp16 products exact, fp32 sums); row g of the
    // result is the bias of heads 2t, 2t + 1. Folding per chunk keeps 8 query words live, not d/8.
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < kChunks; c += 2) {
      // An odd last chunk (head_dim 80 and 96) runs alone.
      constexpr int kLast = kChunks - 1;
      uint32_t qb[2][2][2];  // [chunk c + u][nibble half][k-half]
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (c + u > kLast) break;
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int ch = q4c::KeyChannel(c + u, t, 0, hi, kHeadDim);
          const uint4 qs = s_qs[(((c + u) * 2 + hi) * kHeadsPerTile + g) * 4 + t];
          const uint4 pr = *reinterpret_cast<const uint4*>(st + L::kKParams + 4 * ch);
          // Channels ch, ch + 2 (k-indices 2t, 2t + 1) and ch + 1, ch + 3 (2t + 8, 2t + 9).
          const uint32_t s02 = __byte_perm(pr.x, pr.z, 0x5410);
          const uint32_t s13 = __byte_perm(pr.y, pr.w, 0x5410);
          const uint32_t m02 = __byte_perm(pr.x, pr.z, 0x7632);
          const uint32_t m13 = __byte_perm(pr.y, pr.w, 0x7632);
          if (hi == 0) {
            qb[u][0][0] = q4c::FoldKeyPairSplit<false>(qs.x, qs.z, s02);
            qb[u][0][1] = q4c::FoldKeyPairSplit<false>(qs.y, qs.w, s13);
          } else {
            qb[u][1][0] = q4c::FoldKeyPairSplit<true>(qs.x, qs.z, s02);
            qb[u][1][1] = q4c::FoldKeyPairSplit<true>(qs.y, qs.w, s13);
          }
          const uint32_t a_min[4] = {m02, m02, m13, m13};
          const uint32_t b_hi[2] = {qs.x, qs.y};
          const uint32_t b_lo[2] = {qs.z, qs.w};
          MmaF16(bias, a_min, b_hi);
          MmaF16(bias, a_min, b_lo);
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int mi = lane / 8;
        const int tok = 16 * mt + 8 * (mi & 1) + lane % 8;
        const int cc = min(c + (mi >> 1), kLast);
        uint32_t r[4];
        LdMatrixX4(r, st + L::kKCodes + tok * L::kSmemRowBytes +
                          16 * q4c::SwizzledChunk(tok, cc, kChunks));
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (c + u > kLast) break;
          const uint32_t wg = r[2 * u];
          const uint32_t wg8 = r[2 * u + 1];
          const uint32_t a_lo[4] = {HalfBits2(Codes<0>(wg)), HalfBits2(Codes<0>(wg8)),
                                    HalfBits2(Codes<8>(wg)), HalfBits2(Codes<8>(wg8))};
          MmaF16(acc[mt], a_lo, qb[u][0]);
          const uint32_t a_hi[4] = {HalfBits2(Codes16<4>(wg)), HalfBits2(Codes16<4>(wg8)),
                                    HalfBits2(Codes16<12>(wg)), HalfBits2(Codes16<12>(wg8))};
          MmaF16(acc[mt], a_hi, qb[u][1]);
        }
      }
    }
    float s[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      s[mt][0] = acc[mt][0] + bias[0];
      s[mt][1] = acc[mt][1] + bias[1];
      s[mt][2] = acc[mt][2] + bias[0];
      s[mt][3] = acc[mt][3] + bias[1];
    }
    // Tokens outside the attended 4-bit range (zero-filled codes) score -inf; only the first and
    // last tiles of a row have any, so the test is skipped for the warp on the others.
    if (slot0 < quant_lo || slot0 + kTile > quant_hi) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int slot_lo = slot0 + 16 * mt + g;
        const bool ok_lo = slot_lo >= quant_lo && slot_lo < quant_hi;
        const bool ok_hi = slot_lo + 8 >= quant_lo && slot_lo + 8 < quant_hi;
        if (!ok_lo) s[mt][0] = s[mt][1] = -INFINITY;
        if (!ok_hi) s[mt][2] = s[mt][3] = -INFINITY;
      }
    }

    // Online softmax per head; a head's 32 scores live in the 8 lanes that share t.
    float use[2], alpha[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float top = fmaxf(fmaxf(s[0][e], s[0][e + 2]), fmaxf(s[1][e], s[1][e + 2]));
      for (int offset = 4; offset < 32; offset *= 2) {
        top = fmaxf(top, __shfl_xor_sync(kFullMask, top, offset));
      }
      alpha[e] = q4c::OnlineRescale(run[e], top, use[e]);
    }
    // Past the first tiles the maxima rarely move: skip the rescale when no head's did (not at
    // head_dim 64, whose 16 multiplies cost less than the registers of the vote).
    if (kHeadDim == 64 || !__all_sync(kFullMask, alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
      for (int m = 0; m < L::kMTiles; ++m) {
        o[m][0] *= alpha[0];
        o[m][1] *= alpha[1];
        o[m][2] *= alpha[0];
        o[m][3] *= alpha[1];
      }
    }
    uint32_t pb[2][2];  // P^T fragments of the two k-steps (tokens 0-15, 16-31)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const __half2 p_even =
          __floats2half2_rn(Exp2Ftz(s[mt][0] - use[0]), Exp2Ftz(s[mt][2] - use[0]));
      const __half2 p_odd =
          __floats2half2_rn(Exp2Ftz(s[mt][1] - use[1]), Exp2Ftz(s[mt][3] - use[1]));
      // Transpose from the score layout (tokens g, g+8 x heads 2t, 2t+1) to the B fragment
      // (tokens 2t, 2t+1 | 2t+8, 2t+9 x head g), as attention_decode.cuh does.
      const int src = 8 * t + g / 2;
      const uint32_t e_bits = HalfBits2(p_even);
      const uint32_t o_bits = HalfBits2(p_odd);
      const uint32_t x_even = __shfl_sync(kFullMask, e_bits, src);
      const uint32_t x_odd = __shfl_sync(kFullMask, o_bits, src);
      const uint32_t y_even = __shfl_sync(kFullMask, e_bits, src + 4);
      const uint32_t y_odd = __shfl_sync(kFullMask, o_bits, src + 4);
      const uint32_t x = (g & 1) ? x_odd : x_even;
      const uint32_t y = (g & 1) ? y_odd : y_even;
      pb[mt][0] = __byte_perm(x, y, 0x5410);
      pb[mt][1] = __byte_perm(x, y, 0x7632);
    }
    // The denominators on the tensor cores: ones times P^T sums the rounded probabilities (the
    // weights the value MMA uses) of heads 2t, 2t + 1, whole in each of the head's 8 lanes.
    {
      const uint32_t ones[4] = {0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u};
      float l4[4] = {run[0].l, run[1].l, 0.0f, 0.0f};
      MmaF16(l4, ones, pb[0]);
      MmaF16(l4, ones, pb[1]);
      run[0].l = l4[0];
      run[1].l = l4[1];
    }

    // O^T += V^T P^T, values dequantized per token pair in fp16.
#pragma unroll
    for (int gr = 0; gr < kGroups; ++gr) {
      __half2 vs[4], vm[4];  // {scale, minimum} of tokens 8bi + 2t, 8bi + 2t + 1
#pragma unroll
      for (int bi = 0; bi < 4; ++bi) {
        const int tok = 8 * bi + 2 * t;
        __half2 w0, w1;
        if constexpr (kGroups == 2) {  // both groups of both tokens in one 16-byte read
          const uint4 w = *reinterpret_cast<const uint4*>(st + L::kVParams + tok * kGroups * 4);
          w0 = Half2FromBits(gr == 0 ? w.x : w.y);
          w1 = Half2FromBits(gr == 0 ? w.z : w.w);
        } else if constexpr (kGroups == 1) {  // both tokens in one 8-byte read
          const uint2 w = *reinterpret_cast<const uint2*>(st + L::kVParams + tok * 4);
          w0 = Half2FromBits(w.x);
          w1 = Half2FromBits(w.y);
        } else {
          w0 = Half2FromBits(
              *reinterpret_cast<const uint32_t*>(st + L::kVParams + (tok * kGroups + gr) * 4));
          w1 = Half2FromBits(*reinterpret_cast<const uint32_t*>(st + L::kVParams +
                                                                ((tok + 1) * kGroups + gr) * 4));
        }
        vs[bi] = __lows2half2(w0, w1);
        vm[bi] = __highs2half2(w0, w1);
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int c = 2 * gr + u;
        if (c >= kChunks) break;  // the last group of head_dim 80 and 96 fills one chunk
        uint32_t r[4];
        LdMatrixX4Trans(r, st + L::kVCodes + lane * L::kSmemRowBytes +
                               16 * q4c::SwizzledChunk(lane, c, kChunks));
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
          const uint32_t x = r[2 * ks];
          const uint32_t y = r[2 * ks + 1];
          const __half2 sx = vs[2 * ks], mx = vm[2 * ks];
          const __half2 sy = vs[2 * ks + 1], my = vm[2 * ks + 1];
          const __half2 sx16 = __hmul2(sx, Half2FromBits(0x2C002C00u));  // scale / 16, exact
          const __half2 sy16 = __hmul2(sy, Half2FromBits(0x2C002C00u));
          const uint32_t a0[4] = {
              HalfBits2(__hfma2(Codes<0>(x), sx, mx)), HalfBits2(__hfma2(Codes16<4>(x), sx16, mx)),
              HalfBits2(__hfma2(Codes<0>(y), sy, my)), HalfBits2(__hfma2(Codes16<4>(y), sy16, my))};
          MmaF16(o[2 * c], a0, pb[ks]);
          const uint32_t a1[4] = {HalfBits2(__hfma2(Codes<8>(x), sx, mx)),
                                  HalfBits2(__hfma2(Codes16<12>(x), sx16, mx)),
                                  HalfBits2(__hfma2(Codes<8>(y), sy, my)),
                                  HalfBits2(__hfma2(Codes16<12>(y), sy16, my))};
          MmaF16(o[2 * c + 1], a1, pb[ks]);
        }
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // the outputs below overwrite other warps' stages
  float(*s_o)[kHeadsPerTile][kHeadDim] = reinterpret_cast<float(*)[kHeadsPerTile][kHeadDim]>(smem);
  if (g == 0) {
    s_m[warp * kHeadsPerTile + 2 * t] = run[0].m;
    s_m[warp * kHeadsPerTile + 2 * t + 1] = run[1].m;
    s_l[warp * kHeadsPerTile + 2 * t] = run[0].l;
    s_l[warp * kHeadsPerTile + 2 * t + 1] = run[1].l;
  }
#pragma unroll
  for (int m = 0; m < L::kMTiles; ++m) {
#pragma unroll
    for (int upper = 0; upper < 2; ++upper) {
      const int d = q4c::ValueDim(m, upper, g, kHeadDim);
      if (L::kPadDim != kHeadDim && d >= kHeadDim) continue;  // padding
      s_o[warp][2 * t][d] = o[m][2 * upper];
      s_o[warp][2 * t + 1][d] = o[m][2 * upper + 1];
    }
  }
}

// The exact row index of exact token e (0 .. n_exact): the first sink_len tokens, then the window
// ring (kernels/cpu/kv_q4_exact.h).
__device__ __forceinline__ int ExactRow(const Q4ChannelDecodeShape& s, int e, int sink_len,
                                        int first, int quant_hi) {
  return e < sink_len ? e : s.sink + (quant_hi + (e - sink_len) - first) % s.window;
}

// Asks L2 to fetch the exact rows that AttendExact reads after the quantized loop and to keep
// them there (evict_last) while the loop streams the 4-bit planes past, so that AttendExact's
// short chains of loads hit L2 instead of DRAM. The pointers are read with __ldcg so that the
// compiler does not keep them in registers through the loop.
template <int kHeadDim>
__device__ __forceinline__ void PrefetchExact(const Params& p, int64_t row_index, int first,
                                              int quant_hi) {
  constexpr int kLines = (kHeadDim * 4 + 127) / 128;  // 128-byte lines per exact row
  const Q4ChannelDecodeShape& s = p.s;
  const int sink_len = min(max(s.cache_len - first, 0), s.sink);
  const int n_exact = sink_len + max(0, s.cache_len - quant_hi);
  const auto* ptrs = reinterpret_cast<const long long*>(&p.rows[row_index].k_exact);
  const char* const k_plane = reinterpret_cast<const char*>(__ldcg(ptrs));
  const char* const v_plane = reinterpret_cast<const char*>(__ldcg(ptrs + 1));  // v_exact
  for (int i = threadIdx.x; i < 2 * n_exact * kLines; i += kThreads) {
    const int e = i / (2 * kLines);
    const bool value = (i / kLines) % 2 != 0;
    const int line = i % kLines;
    const char* addr =
        (value ? v_plane : k_plane) +
        static_cast<int64_t>(ExactRow(s, e, sink_len, first, quant_hi)) * kHeadDim * 4 +
        (kHeadDim % 32 == 0 ? 128 * line : min(128 * line, kHeadDim * 4 - 128));  // 320-byte rows
    asm volatile("prefetch.global.L2::evict_last [%0];\n" ::"l"(addr));
  }
}

// The exact tokens of one row (its first `sink` and those in [quant_hi, cache_len)) in fp32:
// each warp takes kBatch tokens at a time round-robin, loading all of their rows (from L2, see
// PrefetchExact) before the first use, so that it waits on the latency once per batch; lanes split
// the head dimension. Leaves its runs in output slots kWarps + warp (AttendQuantized's layout).
// The row's exact planes are read from the table here, not kept in registers through the loop.
// REQUIRES: called by every thread of the block after AttendQuantized.
template <int kHeadDim>
__device__ __forceinline__ void AttendExact(const Params& p, int64_t row_index,
                                            const float (*s_q)[Layout<kHeadDim>::kQStride],
                                            uint8_t* smem, float* s_m, float* s_l, int first,
                                            int quant_hi, int heads_here) {
  constexpr int kPer = q4c::CodeChunks(kHeadDim);  // elements a lane, the last maybe past d
  constexpr int kBatch = 2;
  const Q4ChannelDecodeShape& s = p.s;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int sink_len = min(max(s.cache_len - first, 0), s.sink);
  const int n_exact = sink_len + max(0, s.cache_len - quant_hi);
  const float* const k_exact = p.rows[row_index].k_exact;
  const float* const v_exact = p.rows[row_index].v_exact;
  q4c::SoftmaxRun run[kHeadsPerTile];
  float o[kHeadsPerTile][kPer];
#pragma unroll
  for (int h = 0; h < kHeadsPerTile; ++h) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) o[h][i] = 0.0f;
  }
  for (int e0 = warp * kBatch; e0 < n_exact; e0 += kWarps * kBatch) {
    float kx[kBatch][kPer], vx[kBatch][kPer];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = min(e0 + u, n_exact - 1);  // a repeated row past the end is loaded, not used
      const int r = ExactRow(s, e, sink_len, first, quant_hi);
      const float* kr = k_exact + static_cast<int64_t>(r) * kHeadDim;
      const float* vr = v_exact + static_cast<int64_t>(r) * kHeadDim;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const bool in = kHeadDim % 32 == 0 || lane + 32 * i < kHeadDim;
        kx[u][i] = in ? kr[lane + 32 * i] : 0.0f;
        vx[u][i] = in ? vr[lane + 32 * i] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (e0 + u >= n_exact) break;
        // Every head, padded ones too (zero queries, never merged): no branch, so the compiler
        // interleaves the heads' shuffle chains. At head_dim 64 that spills under the register cap.
#pragma unroll
      for (int h = 0; h < kHeadsPerTile; ++h) {
        if (kHeadDim == 64 && h >= heads_here) break;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          if (kHeadDim % 32 == 0 || lane + 32 * i < kHeadDim) {
            dot = fmaf(s_q[h][lane + 32 * i], kx[u][i], dot);
          }
        }
        dot = WarpSum(dot);
        float use;
        const float alpha = q4c::OnlineRescale(run[h], dot, use);
        const float prob = exp2f(dot - use);
        run[h].l += prob;
#pragma unroll
        for (int i = 0; i < kPer; ++i) o[h][i] = fmaf(prob, vx[u][i], o[h][i] * alpha);
      }
    }
  }
  // AttendQuantized's barrier already retired every stage read; slots kWarps.. are this part's.
  float(*s_o)[kHeadsPerTile][kHeadDim] = reinterpret_cast<float(*)[kHeadsPerTile][kHeadDim]>(smem);
  const int slot = kWarps + warp;
#pragma unroll
  for (int h = 0; h < kHeadsPerTile; ++h) {
    if (lane == 0) {
      s_m[slot * kHeadsPerTile + h] = run[h].m;
      s_l[slot * kHeadsPerTile + h] = run[h].l;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (kHeadDim % 32 == 0 || lane + 32 * i < kHeadDim) s_o[slot][h][lane + 32 * i] = o[h][i];
    }
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, Layout<kHeadDim>::kMinBlocks)
    DecodeQ4ChannelKernel(Params p) {
  using L = Layout<kHeadDim>;
  extern __shared__ __align__(16) uint8_t smem[];
  float(*s_q)[L::kQStride] = reinterpret_cast<float(*)[L::kQStride]>(smem + L::kQOffset);
  float* s_m = reinterpret_cast<float*>(smem + L::kStatsOffset);  // [kOutSlots][kHeadsPerTile]
  float* s_l = s_m + L::kOutSlots * kHeadsPerTile;

  const Q4ChannelDecodeShape& s = p.s;
  const int part = blockIdx.x;
  const int head_tile = blockIdx.y % p.head_tiles;
  const int kv_head = blockIdx.y / p.head_tiles;
  const int b = blockIdx.z;
  const int group = s.num_heads / s.num_kv_heads;
  const int head0 = kv_head * group + head_tile * kHeadsPerTile;
  const int heads_here = min(kHeadsPerTile, group - head_tile * kHeadsPerTile);
  const int64_t row_index = static_cast<int64_t>(b) * s.num_kv_heads + kv_head;
  const Q4ChannelRow row = p.rows[row_index];

  // The head tile's queries, rotated like the keys when asked, in log2 units (fp32).
  const float q_mul = s.scale * kLog2e *
                      LoadQueryRows<kHeadsPerTile, kHeadDim, kThreads>(
                          s_q, p.q + (static_cast<int64_t>(b) * s.num_heads + head0) * kHeadDim,
                          heads_here, s.keys_rotated);
  for (int i = threadIdx.x; i < kHeadsPerTile * kHeadDim; i += kThreads) {
    s_q[i / kHeadDim][i % kHeadDim] *= q_mul;
  }
  __syncthreads();
  uint4* s_qs = reinterpret_cast<uint4*>(smem + L::kQSplitOffset);
  for (int i = threadIdx.x; i < L::kChunks * 2 * kHeadsPerTile * 4; i += kThreads) {
    const int t = i % 4;
    const int hh = i / 4 % kHeadsPerTile;
    const int hi = i / (4 * kHeadsPerTile) % 2;
    const int c = i / (8 * kHeadsPerTile);
    const int ch = q4c::KeyChannel(c, t, 0, hi, kHeadDim);
    uint32_t h[4], l[4];
    for (int k = 0; k < 4; ++k) {
      uint16_t hb, lb;
      const bool real = L::kPadDim == kHeadDim || ch + k < kHeadDim;  // else padding: 0
      q4c::SplitQueryHalf(real ? s_q[hh][ch + k] : 0.0f, hb, lb);
      h[k] = hb;
      l[k] = lb;
    }
    s_qs[i] =
        make_uint4(h[0] | h[2] << 16, h[1] | h[3] << 16, l[0] | l[2] << 16, l[1] | l[3] << 16);
  }
  __syncthreads();

  const int first = max(p.start[b], 0);
  const int quant_lo = min(first + s.sink, s.cache_len);
  const int quant_hi = max(quant_lo, s.cache_len - s.window);
  const bool with_exact = part == p.num_splits - 1;
  if (with_exact) PrefetchExact<kHeadDim>(p, row_index, first, quant_hi);
  AttendQuantized<kHeadDim>(p, row, s_qs, smem, s_m, s_l, first, quant_lo, quant_hi);
  if (with_exact) {
    AttendExact<kHeadDim>(p, row_index, s_q, smem, s_m, s_l, first, quant_hi, heads_here);
  }
  __syncthreads();

  // Merge the runs and write this part's normalised output and log-sum-exp, or with one part the
  // output itself (MergeParts of one part is that part).
  const float(*s_o)[kHeadsPerTile][kHeadDim] =
      reinterpret_cast<const float(*)[kHeadsPerTile][kHeadDim]>(smem);
  const int slots = with_exact ? L::kOutSlots : kWarps;
  for (int i = threadIdx.x; i < kHeadsPerTile * kHeadDim; i += kThreads) {
    const int hh = i / kHeadDim;
    const int d = i % kHeadDim;
    if (hh >= heads_here) continue;
    float m_all = -INFINITY;
    for (int w = 0; w < slots; ++w) m_all = fmaxf(m_all, s_m[w * kHeadsPerTile + hh]);
    float acc = 0.0f;
    float l_all = 0.0f;
    if (m_all != -INFINITY) {
      for (int w = 0; w < slots; ++w) {
        const float f = exp2f(s_m[w * kHeadsPerTile + hh] - m_all);
        acc += f * s_o[w][hh][d];
        l_all += f * s_l[w * kHeadsPerTile + hh];
      }
    }
    const int64_t r = static_cast<int64_t>(b) * s.num_heads + head0 + hh;
    const float x = l_all > 0.0f ? acc / l_all : 0.0f;
    if (p.parts == 1) {
      p.out[r * kHeadDim + d] = x;
      continue;
    }
    p.partial_out[(r * p.parts + part) * kHeadDim + d] = x;
    if (d == 0) {
      q4c::SoftmaxRun merged;
      merged.m = m_all;
      merged.l = l_all;
      p.partial_lse[r * p.parts + part] = q4c::RunLse(merged);
    }
  }
}

// One block per (sequence, query head): the parts merged by their log-sum-exp.
__global__ void MergeQ4ChannelPartsKernel(int parts, int head_dim, const float* partial_out,
                                          const float* partial_lse, float* out) {
  const int64_t r = blockIdx.x;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    out[r * head_dim + d] = q4c::MergeParts(
        partial_lse + r * parts, partial_out + r * parts * head_dim + d, parts, head_dim);
  }
}

inline int HeadTiles(const Q4ChannelDecodeShape& s) {
  const int group = s.num_heads / s.num_kv_heads;
  return (group + kHeadsPerTile - 1) / kHeadsPerTile;
}

inline bool ShapeValid(const Q4ChannelDecodeShape& s) {
  const bool power_of_two = (s.head_dim & (s.head_dim - 1)) == 0;
  return (!s.keys_rotated || power_of_two) && s.batch >= 0 && s.batch <= 65535 &&
         s.num_kv_heads > 0 && s.num_heads > 0 && s.num_heads % s.num_kv_heads == 0 &&
         s.cache_len >= 0 && s.cache_len <= s.max_len && s.sink >= 0 &&
         s.window >= kQ4ChannelGroup &&
         static_cast<int64_t>(s.num_kv_heads) * HeadTiles(s) <= 65535;
}

// Lets the kernel have more than 48 KiB of dynamic shared memory (once per process).
template <int kHeadDim>
cudaError_t AllowSmem() {
  static const cudaError_t err = cudaFuncSetAttribute(DecodeQ4ChannelKernel<kHeadDim>,
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                      Layout<kHeadDim>::kSmemBytes);
  return err;
}

template <int kHeadDim>
cudaError_t Plan(const Q4ChannelDecodeShape& s, Q4ChannelDecodePlan* plan) {
  int device = 0;
  int sms = 0;
  int blocks_per_sm = 0;
  cudaError_t err = AllowSmem<kHeadDim>();
  if (err == cudaSuccess) err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  if (err == cudaSuccess) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks_per_sm, DecodeQ4ChannelKernel<kHeadDim>, kThreads, Layout<kHeadDim>::kSmemBytes);
  }
  if (err != cudaSuccess) return err;
  const long base = static_cast<long>(s.batch) * s.num_kv_heads * HeadTiles(s);
  const long resident = static_cast<long>(sms) * (blocks_per_sm > 0 ? blocks_per_sm : 1);
  const long max_tiles = (static_cast<long>(s.max_len) + kTile - 1) / kTile;
  long most = max_tiles / kMinTilesPerSplit;
  most = most < 1 ? 1 : (most > kMaxSplits ? kMaxSplits : most);
  plan->num_splits = q4c::PlanSplitsByWaves(base, resident, most);
  plan->workspace_bytes = plan->num_splits == 1
                              ? 0
                              : static_cast<size_t>(s.batch) * s.num_heads * plan->num_splits *
                                    (kHeadDim + 1) * sizeof(float);
  return cudaSuccess;
}

template <int kHeadDim>
cudaError_t Run(const Params& p_in, void* workspace, cudaStream_t stream) {
  Params p = p_in;
  p.head_tiles = HeadTiles(p.s);
  p.parts = p.num_splits;
  if (p.s.batch == 0) return cudaSuccess;
  if (p.parts > 1 && (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0)) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err = AllowSmem<kHeadDim>();
  if (err != cudaSuccess) return err;
  if (p.parts > 1) {
    p.partial_out = static_cast<float*>(workspace);
    p.partial_lse =
        p.partial_out + static_cast<int64_t>(p.s.batch) * p.s.num_heads * p.parts * kHeadDim;
  }
  const dim3 grid(p.parts, p.s.num_kv_heads * p.head_tiles, p.s.batch);
  DecodeQ4ChannelKernel<kHeadDim><<<grid, kThreads, Layout<kHeadDim>::kSmemBytes, stream>>>(p);
  err = cudaGetLastError();
  if (err != cudaSuccess || p.parts == 1) return err;
  MergeQ4ChannelPartsKernel<<<p.s.batch * p.s.num_heads, 128, 0, stream>>>(
      p.parts, kHeadDim, p.partial_out, p.partial_lse, p.out);
  return cudaGetLastError();
}

}  // namespace decode_q4c

// ---- launchers ----

// Plans the split over the context for `s` on the current device. Call once per shape (batch,
// heads, head_dim, max_len); the plan holds for every cache_len <= max_len.
// REQUIRES: Q4ChannelHeadDimSupported(head_dim) (else cudaErrorInvalidValue); window >= 32;
// keys_rotated only at a power-of-two head_dim.
inline cudaError_t PlanDecodeAttentionQ4Channel(const Q4ChannelDecodeShape& s,
                                                Q4ChannelDecodePlan* plan) {
  if (!decode_q4c::ShapeValid(s)) return cudaErrorInvalidValue;
  STRATA_DISPATCH_Q4C_HEAD_DIM(s.head_dim, kHeadDim,
                               { return decode_q4c::Plan<kHeadDim>(s, plan); });
  return cudaSuccess;
}

// Decode attention over the default 4-bit cache. `rows` is a device array of
// batch * num_kv_heads Q4ChannelRow (row b * num_kv_heads + h), each with stride >= cache_len and
// its planes 16-byte aligned; q, out, start (int[batch]) device memory; `workspace` holds
// plan.workspace_bytes, 16-byte aligned (may be null when that is 0). Every key group with an
// attended 4-bit token is written (kv_q4_channel.cuh), and the exact rows hold every exact token
// below cache_len.
// REQUIRES: as PlanDecodeAttentionQ4Channel; plan made for this shape.
inline cudaError_t DecodeAttentionQ4Channel(const Q4ChannelDecodeShape& s, const float* q,
                                            const Q4ChannelRow* rows, const int* start,
                                            const Q4ChannelDecodePlan& plan, void* workspace,
                                            float* out, cudaStream_t stream) {
  if (!decode_q4c::ShapeValid(s) || plan.num_splits < 1) return cudaErrorInvalidValue;
  decode_q4c::Params p;
  p.s = s;
  p.q = q;
  p.start = start;
  p.rows = rows;
  p.out = out;
  p.num_splits = plan.num_splits;
  STRATA_DISPATCH_Q4C_HEAD_DIM(s.head_dim, kHeadDim,
                               { return decode_q4c::Run<kHeadDim>(p, workspace, stream); });
  return cudaSuccess;
}

}  // namespace strata::kernels::cuda
