// Causal prefill attention on the tensor cores, fp16 in and out with fp32 softmax statistics and
// accumulators: FlashAttention-2's algorithm (Dao, 2023) on mma.sync m16n8k16, sm_80 and up. The
// layouts, the left padding (start[b]) and the grouped-query mapping are those of
// attention_prefill.cuh's CausalAttention (and kernels/cpu/attention.h); that fp32 kernel stays
// for fp32 activations and odd head sizes.
//
// Tiling (the arithmetic is in kernels/attention_prefill_tiles.h, tested on the CPU). A block owns
// one (sequence, KV head) and 16 * kWarps rows of the packed query matrix (row r = token r / group,
// head r % group of the KV head's group), so all the query heads of a group share each K/V tile it
// loads; each warp owns 16 rows. Key tiles of 64 start at the sequence's first real key and stop
// at the block's last row: tiles after the causal limit are never loaded, and only the tiles that
// cross the diagonal are masked. The block's row tiles are numbered so that the longest (last)
// ones start first, which evens out the causal triangle across the machine.
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

// Runs the body with kWarps the plan's warps per block (4 or 8).
#define STRATA_DISPATCH_PREFILL_WARPS(warps, kWarps, ...) \
  switch (warps) {                                        \
    case 4: {                                             \
      constexpr int kWarps = 4;                           \
      __VA_ARGS__                                         \
    }                                                     \
    case 8: {                                             \
      constexpr int kWarps = 8;                           \
      __VA_ARGS__                                         \
    }                                                     \
    default:                                              \
      return cudaErrorInvalidValue;                       \
  }

namespace prefill_f16 {

inline constexpr int kKeysPerTile = 64;
inline constexpr int kRowsPerWarp = 16;
inline constexpr int kRowPadHalves = 8;  // 16 bytes of padding per shared-memory row

inline bool HeadDimSupported(int head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128;
}

// Q tile, K tile and V tile, each row head_dim + 8 halves.
inline size_t SmemBytes(int head_dim, int warps) {
  return sizeof(__half) * static_cast<size_t>(head_dim + kRowPadHalves) *
         (kRowsPerWarp * warps + 2 * kKeysPerTile);
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

// Blocks per multiprocessor the register cap aims at: 128 registers a thread (16 warps) at
// head_dim 64, which holds everything without spills; above it 4-warp blocks get 168 (3 blocks,
// 12 warps) and 8-warp blocks keep what they need (one block).
template <int kHeadDim, int kWarps>
constexpr int MinBlocksPerSm() {
  return kHeadDim <= 64 ? 16 / kWarps : (kWarps == 4 ? 3 : 1);
}

template <int kHeadDim, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, (MinBlocksPerSm<kHeadDim, kWarps>()))
    PrefillAttentionF16Kernel(CausalAttentionShape s, const __half* __restrict__ q,
                              const __half* __restrict__ k, const __half* __restrict__ v,
                              const int* __restrict__ start, __half* __restrict__ out) {
  namespace tiles = prefill_tiles;
  constexpr int kThreads = kWarps * 32;
  constexpr int kRows = kWarps * kRowsPerWarp;
  constexpr int kN = kKeysPerTile;
  constexpr int kStride = kHeadDim + kRowPadHalves;
  constexpr int kStrideBytes = 2 * kStride;
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kKSteps = kHeadDim / 16;    // k16 steps of Q K^T
  constexpr int kDimBlocks = kHeadDim / 8;  // n8 blocks of O (kHeadDim / 16 pairs)
  constexpr int kKeyBlocks = kN / 8;        // n8 blocks of S
  static_assert(kHeadDim % 16 == 0, "head_dim must be a multiple of 16");

  extern __shared__ uint4 smem_raw[];
  __half* s_q = reinterpret_cast<__half*>(smem_raw);
  __half* s_k = s_q + kRows * kStride;
  __half* s_v = s_k + kN * kStride;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int b = blockIdx.x / s.num_kv_heads;
  const int kv_head = blockIdx.x % s.num_kv_heads;
  const int group = s.num_heads / s.num_kv_heads;
  const int64_t rows_total = static_cast<int64_t>(s.new_tokens) * group;
  const int64_t row0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kRows;
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
    LoadRows<kHeadDim, kThreads>(
        dst, kN, valid, [&](int r) { return src + static_cast<int64_t>(key0 + r) * kHeadDim; });
  };
  if (kt.num_tiles > 0) load_keys(k_head, s_k, kt.key_begin);
  CpAsyncCommit();

  // This thread's two rows of its warp's 16: g and g + 8 (the mma fragment rows).
  const int g = lane / 4;
  const int t = lane % 4;
  int slot[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row0 + warp * kRowsPerWarp + g + 8 * r;
    slot[r] = first_new_slot + tiles::RowToken(row < rows_total ? row : rows_total - 1, group);
  }
  const float scale_log2 = s.scale * tiles::kLog2e;

  // ldmatrix lane addresses (see the fragment layouts of MmaF16 in utils.cuh).
  const uint32_t q_addr = SmemAddr(s_q) +
                          (warp * kRowsPerWarp + lane % 8 + 8 * ((lane / 8) % 2)) * kStrideBytes +
                          16 * (lane / 16);
  const uint32_t k_addr =
      SmemAddr(s_k) + (lane % 8 + 8 * (lane / 16)) * kStrideBytes + 16 * ((lane / 8) % 2);
  const uint32_t v_addr =
      SmemAddr(s_v) + (lane % 8 + 8 * ((lane / 8) % 2)) * kStrideBytes + 16 * (lane / 16);

  float o[kDimBlocks][4];
#pragma unroll
  for (int i = 0; i < kDimBlocks; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};  // this thread's share of its rows' denominators

  for (int j = 0; j < kt.num_tiles; ++j) {
    const int key0 = kt.key_begin + j * kN;
    CpAsyncWaitAll();
    __syncthreads();  // K_j (and Q) visible to all; every warp is done with V_{j-1}
    load_keys(v_head, s_v, key0);
    CpAsyncCommit();

    float sc[kKeyBlocks][4];
#pragma unroll
    for (int i = 0; i < kKeyBlocks; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t a[4];
      LdMatrixX4(a, q_addr + 32 * ks);
#pragma unroll
      for (int p = 0; p < kKeyBlocks / 2; ++p) {
        uint32_t kb[4];
        LdMatrixX4(kb, k_addr + 16 * p * kStrideBytes + 32 * ks);
        const uint32_t b0[2] = {kb[0], kb[1]};
        const uint32_t b1[2] = {kb[2], kb[3]};
        MmaF16(sc[2 * p], a, b0);
        MmaF16(sc[2 * p + 1], a, b1);
      }
    }
    if (j >= kt.num_unmasked) {
#pragma unroll
      for (int i = 0; i < kKeyBlocks; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (!tiles::KeyVisible(key0 + 8 * i + 2 * t + (e & 1), slot[e / 2])) sc[i][e] = -INFINITY;
        }
      }
    }

    // Online softmax: a row's 64 scores sit in the 4 threads of a quad.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kKeyBlocks; ++i) mx = fmaxf(mx, fmaxf(sc[i][2 * r], sc[i][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
      const float m_new = fmaxf(m[r], mx * scale_log2);
      const float alpha = tiles::RescaleFactor(m[r], m_new);
      m[r] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kKeyBlocks; ++i) {
        sc[i][2 * r] = tiles::Probability(sc[i][2 * r], scale_log2, m_new);
        sc[i][2 * r + 1] = tiles::Probability(sc[i][2 * r + 1], scale_log2, m_new);
        sum += sc[i][2 * r] + sc[i][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int i = 0; i < kDimBlocks; ++i) {
        o[i][2 * r] *= alpha;
        o[i][2 * r + 1] *= alpha;
      }
    }

    CpAsyncWaitAll();
    __syncthreads();  // V_j visible to all; every warp is done with K_j
    if (j + 1 < kt.num_tiles) load_keys(k_head, s_k, key0 + kN);
    CpAsyncCommit();

#pragma unroll
    for (int ks = 0; ks < kN / 16; ++ks) {
      const uint32_t a[4] = {PackHalf2(sc[2 * ks][0], sc[2 * ks][1]),
                             PackHalf2(sc[2 * ks][2], sc[2 * ks][3]),
                             PackHalf2(sc[2 * ks + 1][0], sc[2 * ks + 1][1]),
                             PackHalf2(sc[2 * ks + 1][2], sc[2 * ks + 1][3])};
#pragma unroll
      for (int p = 0; p < kDimBlocks / 2; ++p) {
        uint32_t vb[4];
        LdMatrixX4Trans(vb, v_addr + 16 * ks * kStrideBytes + 32 * p);
        const uint32_t b0[2] = {vb[0], vb[1]};
        const uint32_t b1[2] = {vb[2], vb[3]};
        MmaF16(o[2 * p], a, b0);
        MmaF16(o[2 * p + 1], a, b1);
      }
    }
  }

  // Normalise and stage the warp's 16 rows in its own rows of s_q, then store 16-byte chunks.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    sum += __shfl_xor_sync(kFullMask, sum, 2);
    inv[r] = slot[r] < seq_start ? 0.0f : tiles::InverseDenominator(sum);
  }
  __syncwarp();  // the warp's rows of s_q were last read by its own ldmatrix
  __half* s_o = s_q + warp * kRowsPerWarp * kStride;
#pragma unroll
  for (int i = 0; i < kDimBlocks; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      *reinterpret_cast<uint32_t*>(s_o + (g + 8 * r) * kStride + 8 * i + 2 * t) =
          PackHalf2(o[i][2 * r] * inv[r], o[i][2 * r + 1] * inv[r]);
    }
  }
  __syncwarp();
  for (int c = lane; c < kRowsPerWarp * kChunks; c += 32) {
    const int r = c / kChunks;
    const int col = 8 * (c % kChunks);
    const int64_t row = row0 + warp * kRowsPerWarp + r;
    if (row < rows_total) {
      *reinterpret_cast<uint4*>(out + row_offset(row) + col) =
          *reinterpret_cast<const uint4*>(s_o + r * kStride + col);
    }
  }
}

template <int kHeadDim, int kWarps>
cudaError_t Run(const CausalAttentionShape& s, const __half* q, const __half* k, const __half* v,
                const int* start, __half* out, cudaStream_t stream) {
  const size_t smem = SmemBytes(kHeadDim, kWarps);
  if (smem > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(PrefillAttentionF16Kernel<kHeadDim, kWarps>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const int64_t rows = static_cast<int64_t>(s.new_tokens) * (s.num_heads / s.num_kv_heads);
  const int64_t row_tiles = (rows + kRowsPerWarp * kWarps - 1) / (kRowsPerWarp * kWarps);
  const int64_t seq_heads = static_cast<int64_t>(s.batch) * s.num_kv_heads;
  if (row_tiles > 65535 || seq_heads > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(seq_heads), static_cast<unsigned>(row_tiles));
  PrefillAttentionF16Kernel<kHeadDim, kWarps>
      <<<grid, kWarps * 32, smem, stream>>>(s, q, k, v, start, out);
  return cudaGetLastError();
}

inline bool ShapeValid(const CausalAttentionShape& s) {
  return s.batch >= 0 && s.num_kv_heads > 0 && s.num_heads > 0 &&
         s.num_heads % s.num_kv_heads == 0 && HeadDimSupported(s.head_dim) && s.new_tokens >= 0 &&
         s.new_tokens <= s.cache_len && s.cache_len <= s.max_len;
}

}  // namespace prefill_f16

// ---- launchers ----

// Plans the tensor-core prefill for a shape: 8 warps (128 rows) per block at head_dim 64 when each
// sequence and KV head has at least 512 packed rows, so each K/V tile serves twice the rows at two
// blocks per multiprocessor; 4 otherwise (above head_dim 64 an 8-warp block needs more registers
// than leave room for a second one). A first guess: prefill_bench times both block sizes. Returns
// cudaErrorInvalidValue for an unsupported shape (head_dim not 64, 80, 96 or 128; num_heads not a
// multiple of num_kv_heads; bad lengths).
inline cudaError_t PlanPrefillAttention(const CausalAttentionShape& s, PrefillAttentionPlan* plan) {
  if (!prefill_f16::ShapeValid(s)) return cudaErrorInvalidValue;
  const int64_t rows = static_cast<int64_t>(s.new_tokens) * (s.num_heads / s.num_kv_heads);
  plan->warps = s.head_dim <= 64 && rows >= 512 ? 8 : 4;
  return cudaSuccess;
}

// Causal attention with fp16 q, k, v and out (layouts of CausalAttentionShape in params.h) on the
// tensor cores; the softmax and the accumulation are fp32. q, k, v, out are device memory, 16-byte
// aligned; start is int[batch] in device memory. REQUIRES: the plan came from
// PlanPrefillAttention (or names 4 or 8 warps) for a valid shape; sm_80 or newer.
inline cudaError_t PrefillAttentionF16(const CausalAttentionShape& s,
                                       const PrefillAttentionPlan& plan, const __half* q,
                                       const __half* k, const __half* v, const int* start,
                                       __half* out, cudaStream_t stream) {
  if (!prefill_f16::ShapeValid(s)) return cudaErrorInvalidValue;
  if (s.batch == 0 || s.new_tokens == 0) return cudaSuccess;
  STRATA_DISPATCH_PREFILL_WARPS(plan.warps, kWarps, {
    STRATA_DISPATCH_PREFILL_HEAD_DIM(s.head_dim, kHeadDim, {
      return prefill_f16::Run<kHeadDim, kWarps>(s, q, k, v, start, out, stream);
    });
  });
}

}  // namespace strata::kernels::cuda
