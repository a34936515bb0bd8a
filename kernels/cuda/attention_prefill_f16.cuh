// Causal prefill attention on the tensor cores, fp16 in and out with fp32 softmax statistics and
// accumulators: FlashAttention-2's algorithm (Dao, 2023) on mma.sync m16n8k16, sm_80 and up. The
// layouts, the left padding (start[b]) and the grouped-query mapping are those of
// attention_prefill.cuh's CausalAttention (and kernels/cpu/attention.h); that fp32 kernel stays
// for fp32 activations and odd head sizes.
//
// Tiling (the arithmetic is in kernels/attention_prefill_tiles.h, tested on the CPU). A block owns
// one (sequence, KV head) and kWarps * 16 * kRowTiles rows of the packed query matrix (row r =
// token r / group, head r % group of the KV head's group), so all the query heads of a group share
// each K/V tile it loads; each warp owns 16 * kRowTiles rows (one or two mma row tiles, so each K
// and V fragment it reads serves one or two mma). Key tiles of 64 start at the sequence's first
// real key and stop at the block's last row: tiles after the causal limit are never loaded, and
// only the tiles that cross the diagonal are masked.
//
// Grid order (prefill_tiles::BlockTileFor): a one-dimensional grid in bands of (sequence, KV
// head) pairs whose K and V fit in a third of L2; within a band the longest row tiles start first.
// The blocks running at once then share their K/V tiles through L2 (with the pairs varying
// fastest, as before, the resident blocks spanned every pair and read K/V from DRAM at 2.3 TB/s
// at 4,096 tokens on an H100), and the long causal rows do not end up in the last wave.
//
// Per tile, as FlashAttention-2 does: S = Q K^T with Q and K fragments read from shared memory by
// ldmatrix; the online softmax in registers (log2 domain, one exp2 per score); P converted to fp16
// in registers, where the accumulator layout of S is already the A-operand layout of P V; then
// O += P V with V fragments read by ldmatrix.trans. K_{j+1} is copied (cp.async) while P V_j runs
// and V_j while Q K_j^T runs, with one buffer each. Shared-memory rows are padded by 16 bytes, so
// the eight 16-byte rows of each ldmatrix land in distinct banks for every supported head size.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention_prefill_tiles.h"
#include "kernels/cuda/params.h"
#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

// Runs the body with kHeadDim a constant for each head size the tensor-core prefill supports; any
// other size makes the enclosing launcher return cudaErrorInvalidValue.
#define STRATA_DISPATCH_PREFILL_HEAD_DIM(head_dim, kHeadDim, ...) \
  switch (head_dim) {                                             \
    case 64: {                                                    \
      constexpr int kHeadDim = 64;                                \
      __VA_ARGS__                                                 \
    }                                                             \
    case 80: {                                                    \
      constexpr int kHeadDim = 80;                                \
      __VA_ARGS__                                                 \
    }                                                             \
    case 96: {                                                    \
      constexpr int kHeadDim = 96;                                \
      __VA_ARGS__                                                 \
    }                                                             \
    case 128: {                                                   \
      constexpr int kHeadDim = 128;                               \
      __VA_ARGS__                                                 \
    }                                                             \
    default:                                                      \
      return cudaErrorInvalidValue;                               \
  }

// Runs the body with kWarps and kRowTiles the plan's block shape: 4 warps of 16 rows, 8 warps of
// 16 rows, or 4 warps of 32 rows (two 16-row mma tiles each).
#define STRATA_DISPATCH_PREFILL_BLOCK(warps, warp_rows, kWarps, kRowTiles, ...) \
  switch ((warps)*100 + (warp_rows)) {                                          \
    case 416: {                                                                 \
      constexpr int kWarps = 4, kRowTiles = 1;                                  \
      __VA_ARGS__                                                               \
    }                                                                           \
    case 816: {                                                                 \
      constexpr int kWarps = 8, kRowTiles = 1;                                  \
      __VA_ARGS__                                                               \
    }                                                                           \
    case 432: {                                                                 \
      constexpr int kWarps = 4, kRowTiles = 2;                                  \
      __VA_ARGS__                                                               \
    }                                                                           \
    default:                                                                    \
      return cudaErrorInvalidValue;                                             \
  }

namespace prefill_f16 {

inline constexpr int kKeysPerTile = 64;
inline constexpr int kRowsPerWarp = 16;
inline constexpr int kRowPadHalves = 8;  // 16 bytes of padding per shared-memory row

inline bool HeadDimSupported(int head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128;
}

// Q tile (`rows` rows), K tile and V tile, each row head_dim + 8 halves.
inline size_t SmemBytes(int head_dim, int rows) {
  return sizeof(__half) * static_cast<size_t>(head_dim + kRowPadHalves) * (rows + 2 * kKeysPerTile);
}

// ---- kernels ----

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; zero-fills when !valid (src is then not read).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
#endif
}

__device__ __forceinline__ void CpAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

__device__ __forceinline__ void CpAsyncWaitAll() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// Copies `rows` rows of kHeadDim halves into shared rows of kStride halves: row i from row_ptr(i)
// when i < valid_rows, zeros otherwise.
template <int kHeadDim, int kThreads, typename RowPtr>
__device__ __forceinline__ void LoadRows(__half* dst, int rows, int valid_rows, RowPtr row_ptr) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kStride = kHeadDim + kRowPadHalves;
  for (int c = threadIdx.x; c < rows * kChunks; c += kThreads) {
    const int r = c / kChunks;
    const int col = 8 * (c % kChunks);
    const bool valid = r < valid_rows;
    const __half* src = valid ? row_ptr(r) + col : row_ptr(0);
    CpAsync16(SmemAddr(dst + r * kStride + col), src, valid);
  }
}

// Copies one tile of kKeysPerTile key (or value) rows, row i from src + i * kHeadDim when
// i < valid_rows and zeros otherwise. When the block's threads divide into whole rows, each thread
// keeps one column and steps down the rows, so its addresses are a base plus constants (the loop
// inside the kernel's tile loop then holds two address registers rather than one per copy).
template <int kHeadDim, int kThreads>
__device__ __forceinline__ void LoadKeyTile(__half* dst, const __half* src, int valid_rows) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kStride = kHeadDim + kRowPadHalves;
  if constexpr (kThreads % kChunks == 0 && kKeysPerTile % (kThreads / kChunks) == 0) {
    constexpr int kRowStep = kThreads / kChunks;
    const int r0 = threadIdx.x / kChunks;
    const int col = 8 * (threadIdx.x % kChunks);
    const uint32_t d0 = SmemAddr(dst + r0 * kStride + col);
    const __half* s0 = src + r0 * kHeadDim + col;
#pragma unroll
    for (int i = 0; i < kKeysPerTile / kRowStep; ++i) {
      CpAsync16(d0 + 2 * i * kRowStep * kStride, s0 + i * kRowStep * kHeadDim,
                r0 + i * kRowStep < valid_rows);
    }
  } else {
    LoadRows<kHeadDim, kThreads>(dst, kKeysPerTile, valid_rows,
                                 [&](int r) { return src + r * kHeadDim; });
  }
}

// Blocks per multiprocessor the register cap aims at. 16 rows a warp: 128 registers a thread (16
// warps) at head_dim 64, which holds everything without spills; above it 4-warp blocks get 168
// (3 blocks, 12 warps) and 8-warp blocks keep what they need (one block). 32 rows a warp (twice
// the accumulators): 255, 2 blocks of 4 warps (FlashAttention-2's 128 x 64 block at head_dim
// 128); at head_dim 64 a cap of 168 spills.
template <int kHeadDim, int kWarps, int kRowTiles>
constexpr int MinBlocksPerSm() {
  if (kRowTiles == 2) return 2;
  return kHeadDim <= 64 ? 16 / kWarps : (kWarps == 4 ? 3 : 1);
}

// kRowTiles: 16-row mma tiles per warp (1 or 2). With 2, every K and V fragment a warp reads from
// shared memory feeds two mma instead of one, which halves the shared-memory reads per mma (with
// 16 rows a warp the ldmatrix traffic, not the tensor cores, bounds the kernel at head_dim 128).
template <int kHeadDim, int kWarps, int kRowTiles>
__global__ void __launch_bounds__(kWarps * 32, (MinBlocksPerSm<kHeadDim, kWarps, kRowTiles>()))
    PrefillAttentionF16Kernel(CausalAttentionShape s, int band, const __half* __restrict__ q,
                              const __half* __restrict__ k, const __half* __restrict__ v,
                              const int* __restrict__ start, __half* __restrict__ out) {
  namespace tiles = prefill_tiles;
  constexpr int kThreads = kWarps * 32;
  constexpr int kWarpRows = kRowsPerWarp * kRowTiles;
  constexpr int kRows = kWarps * kWarpRows;
  constexpr int kN = kKeysPerTile;
  constexpr int kStride = kHeadDim + kRowPadHalves;
  constexpr int kStrideBytes = 2 * kStride;
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kKSteps = kHeadDim / 16;    // k16 steps of Q K^T
  constexpr int kDimBlocks = kHeadDim / 8;  // n8 blocks of O (kHeadDim / 16 pairs)
  constexpr int kKeyBlocks = kN / 8;        // n8 blocks of S
  static_assert(kHeadDim % 16 == 0, "head_dim must be a multiple of 16");
  static_assert(kRowTiles == 1 || kRowTiles == 2, "one or two 16-row tiles per warp");

  extern __shared__ uint4 smem_raw[];
  __half* s_q = reinterpret_cast<__half*>(smem_raw);
  __half* s_k = s_q + kRows * kStride;
  __half* s_v = s_k + kN * kStride;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = s.num_heads / s.num_kv_heads;
  const int64_t rows_total = static_cast<int64_t>(s.new_tokens) * group;
  const int64_t row_tiles = (rows_total + kRows - 1) / kRows;
  const tiles::BlockTile bt = tiles::BlockTileFor(
      blockIdx.x, static_cast<int64_t>(s.batch) * s.num_kv_heads, row_tiles, band);
  const int b = static_cast<int>(bt.seq_head / s.num_kv_heads);
  const int kv_head = static_cast<int>(bt.seq_head % s.num_kv_heads);
  const int64_t row0 = bt.row_tile * kRows;
  const int first_new_slot = s.cache_len - s.new_tokens;
  const int seq_start = start[b];
  const tiles::KeyTiles kt =
      tiles::KeyTilesFor(first_new_slot, seq_start, s.new_tokens, group, row0, kRows, kN);

  // The packed row's query (and output) vector.
  const auto row_offset = [&](int64_t row) {
    const int64_t tok = tiles::RowToken(row, group);
    const int head = kv_head * group + tiles::RowHeadInGroup(row, group);
    return ((static_cast<int64_t>(b) * s.new_tokens + tok) * s.num_heads + head) * kHeadDim;
  };
  const int valid_rows = static_cast<int>(rows_total - row0 < kRows ? rows_total - row0 : kRows);
  // A block of padding rows copies nothing (so no copy into s_q is pending when it writes zeros).
  if (kt.num_tiles > 0) {
    LoadRows<kHeadDim, kThreads>(s_q, kRows, valid_rows,
                                 [&](int r) { return q + row_offset(row0 + r); });
  }
  const int64_t head_offset =
      (static_cast<int64_t>(b) * s.num_kv_heads + kv_head) * s.max_len * kHeadDim;
  const __half* k_head = k + head_offset;
  const __half* v_head = v + head_offset;
  const int key_end = kt.key_end;
  const auto load_keys = [&](const __half* src, __half* dst, int key0) {
    const int valid = key_end - key0 < kN ? key_end - key0 : kN;
    LoadKeyTile<kHeadDim, kThreads>(dst, src + static_cast<int64_t>(key0) * kHeadDim, valid);
  };
  if (kt.num_tiles > 0) load_keys(k_head, s_k, kt.key_begin);
  CpAsyncCommit();

  // This thread's rows in each of its warp's 16-row tiles: g and g + 8 (the mma fragment rows).
  const int g = lane / 4;
  const int t = lane % 4;
  int slot[kRowTiles][2];
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row0 + warp * kWarpRows + kRowsPerWarp * mt + g + 8 * r;
      slot[mt][r] =
          first_new_slot + tiles::RowToken(row < rows_total ? row : rows_total - 1, group);
    }
  }
  const float scale_log2 = s.scale * tiles::kLog2e;

  // ldmatrix lane addresses (see the fragment layouts of MmaF16 in utils.cuh).
  const uint32_t q_addr = SmemAddr(s_q) +
                          (warp * kWarpRows + lane % 8 + 8 * ((lane / 8) % 2)) * kStrideBytes +
                          16 * (lane / 16);
  const uint32_t k_addr =
      SmemAddr(s_k) + (lane % 8 + 8 * (lane / 16)) * kStrideBytes + 16 * ((lane / 8) % 2);
  const uint32_t v_addr =
      SmemAddr(s_v) + (lane % 8 + 8 * ((lane / 8) % 2)) * kStrideBytes + 16 * (lane / 16);

  float o[kRowTiles][kDimBlocks][4];
  float m[kRowTiles][2];
  float l[kRowTiles][2];  // this thread's share of its rows' denominators
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < kDimBlocks; ++i) {
      o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    }
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  for (int j = 0; j < kt.num_tiles; ++j) {
    const int key0 = kt.key_begin + j * kN;
    CpAsyncWaitAll();
    __syncthreads();  // K_j (and Q) visible to all; every warp is done with V_{j-1}
    load_keys(v_head, s_v, key0);
    CpAsyncCommit();

    float sc[kRowTiles][kKeyBlocks][4];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < kKeyBlocks; ++i) {
        sc[mt][i][0] = sc[mt][i][1] = sc[mt][i][2] = sc[mt][i][3] = 0.0f;
      }
    }
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t a[kRowTiles][4];
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        LdMatrixX4(a[mt], q_addr + kRowsPerWarp * mt * kStrideBytes + 32 * ks);
      }
#pragma unroll
      for (int p = 0; p < kKeyBlocks / 2; ++p) {
        uint32_t kb[4];
        LdMatrixX4(kb, k_addr + 16 * p * kStrideBytes + 32 * ks);
        const uint32_t b0[2] = {kb[0], kb[1]};
        const uint32_t b1[2] = {kb[2], kb[3]};
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          MmaF16(sc[mt][2 * p], a[mt], b0);
          MmaF16(sc[mt][2 * p + 1], a[mt], b1);
        }
      }
    }
    if (j >= kt.num_unmasked) {
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
        for (int i = 0; i < kKeyBlocks; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (!tiles::KeyVisible(key0 + 8 * i + 2 * t + (e & 1), slot[mt][e / 2])) {
              sc[mt][i][e] = -INFINITY;
            }
          }
        }
      }
    }

    // Online softmax: a row's 64 scores sit in the 4 threads of a quad.
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < kKeyBlocks; ++i) {
          mx = fmaxf(mx, fmaxf(sc[mt][i][2 * r], sc[mt][i][2 * r + 1]));
        }
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
        const float m_new = fmaxf(m[mt][r], mx * scale_log2);
        const float alpha = tiles::RescaleFactor(m[mt][r], m_new);
        m[mt][r] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kKeyBlocks; ++i) {
          sc[mt][i][2 * r] = tiles::Probability(sc[mt][i][2 * r], scale_log2, m_new);
          sc[mt][i][2 * r + 1] = tiles::Probability(sc[mt][i][2 * r + 1], scale_log2, m_new);
          sum += sc[mt][i][2 * r] + sc[mt][i][2 * r + 1];
        }
        l[mt][r] = l[mt][r] * alpha + sum;
#pragma unroll
        for (int i = 0; i < kDimBlocks; ++i) {
          o[mt][i][2 * r] *= alpha;
          o[mt][i][2 * r + 1] *= alpha;
        }
      }
    }
    // P in fp16, already in the A-operand layout of P V; packing it now frees half of S's registers
    // before the next tile's copies are issued.
    uint32_t pa[kRowTiles][kN / 16][4];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
      for (int ks = 0; ks < kN / 16; ++ks) {
        pa[mt][ks][0] = PackHalf2(sc[mt][2 * ks][0], sc[mt][2 * ks][1]);
        pa[mt][ks][1] = PackHalf2(sc[mt][2 * ks][2], sc[mt][2 * ks][3]);
        pa[mt][ks][2] = PackHalf2(sc[mt][2 * ks + 1][0], sc[mt][2 * ks + 1][1]);
        pa[mt][ks][3] = PackHalf2(sc[mt][2 * ks + 1][2], sc[mt][2 * ks + 1][3]);
      }
    }

    CpAsyncWaitAll();
    __syncthreads();  // V_j visible to all; every warp is done with K_j
    if (j + 1 < kt.num_tiles) load_keys(k_head, s_k, key0 + kN);
    CpAsyncCommit();

#pragma unroll
    for (int ks = 0; ks < kN / 16; ++ks) {
#pragma unroll
      for (int p = 0; p < kDimBlocks / 2; ++p) {
        uint32_t vb[4];
        LdMatrixX4Trans(vb, v_addr + 16 * ks * kStrideBytes + 32 * p);
        const uint32_t b0[2] = {vb[0], vb[1]};
        const uint32_t b1[2] = {vb[2], vb[3]};
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          MmaF16(o[mt][2 * p], pa[mt][ks], b0);
          MmaF16(o[mt][2 * p + 1], pa[mt][ks], b1);
        }
      }
    }
  }

  // Normalise and stage the warp's rows in its own rows of s_q, then store 16-byte chunks.
  __syncwarp();  // the warp's rows of s_q were last read by its own ldmatrix
  __half* s_o = s_q + warp * kWarpRows * kStride;
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mt][r];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      inv[r] = slot[mt][r] < seq_start ? 0.0f : tiles::InverseDenominator(sum);
    }
#pragma unroll
    for (int i = 0; i < kDimBlocks; ++i) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        *reinterpret_cast<uint32_t*>(s_o + (kRowsPerWarp * mt + g + 8 * r) * kStride + 8 * i +
                                     2 * t) =
            PackHalf2(o[mt][i][2 * r] * inv[r], o[mt][i][2 * r + 1] * inv[r]);
      }
    }
  }
  __syncwarp();
  for (int c = lane; c < kWarpRows * kChunks; c += 32) {
    const int r = c / kChunks;
    const int col = 8 * (c % kChunks);
    const int64_t row = row0 + warp * kWarpRows + r;
    if (row < rows_total) {
      *reinterpret_cast<uint4*>(out + row_offset(row) + col) =
          *reinterpret_cast<const uint4*>(s_o + r * kStride + col);
    }
  }
}

// The (sequence, KV head) pairs per band of the grid order (prefill_tiles::BlockTileFor): as many
// as keep the band's K and V within kBandBytes, a third of the H100's 50 MB L2, so the band's
// tiles are read from DRAM about once while the blocks running beside them hit L2.
inline constexpr int64_t kBandBytes = int64_t{16} << 20;

inline int BandFor(const CausalAttentionShape& s) {
  const int64_t kv_bytes = 2 * static_cast<int64_t>(s.cache_len) * s.head_dim * sizeof(__half);
  const int64_t band = kv_bytes > 0 ? kBandBytes / kv_bytes : 1;
  return static_cast<int>(band < 1 ? 1 : (band > (1 << 20) ? (1 << 20) : band));
}

template <int kHeadDim, int kWarps, int kRowTiles>
cudaError_t Run(const CausalAttentionShape& s, const __half* q, const __half* k, const __half* v,
                const int* start, __half* out, cudaStream_t stream) {
  constexpr int kRows = kWarps * kRowsPerWarp * kRowTiles;
  const size_t smem = SmemBytes(kHeadDim, kRows);
  if (smem > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(PrefillAttentionF16Kernel<kHeadDim, kWarps, kRowTiles>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const int64_t rows = static_cast<int64_t>(s.new_tokens) * (s.num_heads / s.num_kv_heads);
  const int64_t blocks =
      static_cast<int64_t>(s.batch) * s.num_kv_heads * ((rows + kRows - 1) / kRows);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  PrefillAttentionF16Kernel<kHeadDim, kWarps, kRowTiles>
      <<<static_cast<unsigned>(blocks), kWarps * 32, smem, stream>>>(s, BandFor(s), q, k, v, start,
                                                                     out);
  return cudaGetLastError();
}

inline bool ShapeValid(const CausalAttentionShape& s) {
  return s.batch >= 0 && s.num_kv_heads > 0 && s.num_heads > 0 &&
         s.num_heads % s.num_kv_heads == 0 && HeadDimSupported(s.head_dim) && s.new_tokens >= 0 &&
         s.new_tokens <= s.cache_len && s.cache_len <= s.max_len;
}

}  // namespace prefill_f16

// ---- launchers ----

// Plans the tensor-core prefill for a shape. Above head_dim 64, with at least 256 packed rows per
// sequence and KV head: 4 warps of 32 rows (128 rows, FlashAttention-2's block on sm_80 and
// sm_90), which halves the shared-memory reads per mma. At head_dim 64 with at least 512 rows: 8
// warps of 16 rows (128 rows, 16 warps a multiprocessor at 128 registers; 0.93 of the
// FlashAttention-2 backend on an H100). Otherwise 4 warps of 16 rows, so short prompts still make
// enough blocks. prefill_bench times every block shape (`kernel=prefill_variant`). Returns
// cudaErrorInvalidValue for an unsupported shape (head_dim not 64, 80, 96 or 128; num_heads not a
// multiple of num_kv_heads; bad lengths).
inline cudaError_t PlanPrefillAttention(const CausalAttentionShape& s, PrefillAttentionPlan* plan) {
  if (!prefill_f16::ShapeValid(s)) return cudaErrorInvalidValue;
  const int64_t rows = static_cast<int64_t>(s.new_tokens) * (s.num_heads / s.num_kv_heads);
  plan->warps = s.head_dim <= 64 && rows >= 512 ? 8 : 4;
  plan->warp_rows = s.head_dim > 64 && rows >= 256 ? 32 : 16;
  return cudaSuccess;
}

// Causal attention with fp16 q, k, v and out (layouts of CausalAttentionShape in params.h) on the
// tensor cores; the softmax and the accumulation are fp32. q, k, v, out are device memory, 16-byte
// aligned; start is int[batch] in device memory. REQUIRES: the plan came from
// PlanPrefillAttention (or names 4 or 8 warps of 16 rows, or 4 warps of 32) for a valid shape;
// sm_80 or newer.
inline cudaError_t PrefillAttentionF16(const CausalAttentionShape& s,
                                       const PrefillAttentionPlan& plan, const __half* q,
                                       const __half* k, const __half* v, const int* start,
                                       __half* out, cudaStream_t stream) {
  if (!prefill_f16::ShapeValid(s)) return cudaErrorInvalidValue;
  if (s.batch == 0 || s.new_tokens == 0) return cudaSuccess;
  STRATA_DISPATCH_PREFILL_BLOCK(plan.warps, plan.warp_rows, kWarps, kRowTiles, {
    STRATA_DISPATCH_PREFILL_HEAD_DIM(s.head_dim, kHeadDim, {
      return prefill_f16::Run<kHeadDim, kWarps, kRowTiles>(s, q, k, v, start, out, stream);
    });
  });
}

}  // namespace strata::kernels::cuda
