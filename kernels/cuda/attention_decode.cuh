// Decode attention (one new query token per sequence) read straight from the KV cache, in two
// cache formats: the 4-bit cache of kernels/kv_q4_format.h (DecodeAttentionQ4, CUDA twin of
// kernels/cpu/attention_q4.h) and a plain fp16 cache (DecodeAttentionF16).
//
// Work partitioning (flash-decoding). A thread block owns one (sequence, KV head, head tile of up
// to 8 query heads sharing that KV head) and one contiguous split of the sequence's 16-token
// tiles; its 4 warps take the split's tiles round-robin, each with its own online softmax, and
// merge through shared memory at the end. With more than one split per sequence each block writes
// a normalised partial output and its log-sum-exp, and MergeSplitsKernel combines them. The
// number of splits is planned on the host once (PlanDecodeAttention) to fill the GPU for one wave.
//
// Tensor cores, transposed. With at most 8 query heads per KV head the natural MMA shape
// (16 rows of heads) would waste half or more of every instruction, so both products are taken
// transposed: S^T[16 tokens, 8 heads] = K[16, d] Q^T and O^T[d, 8 heads] += V^T[d, 16] P^T.
// Every K and V element is read from memory once per head tile, straight into registers (no
// shared-memory staging): each lane loads exactly the bytes its MMA fragments need, and warps
// prefetch kStages - 1 tiles ahead. Because a dot product does not care about the order of its
// terms, the head dimension is permuted per k-step so that the lane's contiguous bytes feed its
// fragment slots; Q is permuted identically when its fragments are built.
//
// 4-bit dequantization in registers. For keys the scale and minimum are pulled out of the dot
// product, score = scale·(q·n) + minimum·Σq per group, so the MMA sees only the exact codes n
// (0..15, made by OR-ing a nibble into the mantissa of fp16 1024 and subtracting 1024). Values are
// dequantized to fp16 (n·scale + minimum, one HFMA2 per two elements) because P·scale could
// underflow fp16 at small scales.
//
// Precision: Q, P and dequantized V are fp16 MMA operands with fp32 accumulation, so outputs carry
// a normalised error of order 1e-3 against an fp64 reference on the dequantized cache.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

namespace decode {

inline constexpr int kTileTokens = 16;
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kHeadsPerTile = 8;
// Fewest tiles one split gets, so that merging partials stays a small fraction of the traffic.
inline constexpr int kMinTilesPerSplit = 2 * kWarps;
inline constexpr int kMaxSplits = 256;
inline constexpr float kLog2e = 1.4426950408889634f;

struct Params {
  DecodeAttentionShape s;
  const float* q = nullptr;
  const int* start = nullptr;
  float* out = nullptr;
  const void* k = nullptr;  // codes (Q4) or fp16 rows (F16), [batch, kv_heads, max_len, ...]
  const void* v = nullptr;
  const __half* k_params = nullptr;  // Q4 only
  const __half* v_params = nullptr;
  int num_splits = 1;
  int head_tiles = 1;
  float* partial_out = nullptr;  // [batch * num_heads, num_splits, head_dim]
  float* partial_lse = nullptr;  // [batch * num_heads, num_splits], log2 domain
};

// ---- kernels ----

__device__ __forceinline__ uint32_t LoadU32(const void* p, bool ok) {
  return ok ? __ldg(static_cast<const unsigned int*>(p)) : 0u;
}
__device__ __forceinline__ uint2 LoadU64(const void* p, bool ok) {
  return ok ? __ldg(static_cast<const uint2*>(p)) : make_uint2(0u, 0u);
}
__device__ __forceinline__ uint4 LoadU128(const void* p, bool ok) {
  return ok ? __ldg(static_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
}
__device__ __forceinline__ uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The 4-bit cache. Lane (g, t) = (lane / 4, lane % 4) of a warp working on tile rows r0..r0+15:
//   K: tokens r0+g and r0+g+8, per group the 8 code bytes [8t, 8t+8) and the {scale, minimum}
//      pairs; word w of those bytes feeds k-steps (w, low nibbles) and (w, high nibbles).
//   V: tokens r0+2t, +1, +8, +9, the code bytes [4·kGroups·g, +4·kGroups) of the row (all in one
//      group) and that group's {scale, minimum}; byte b of word k gives two O^T rows of m-tile
//      4k + b, its low nibble for row g and its high nibble for row g + 8.
template <int kHeadDim>
struct Q4Tiles {
  static constexpr int kGroups = kHeadDim / 64;
  static constexpr int kStages = 3;
  static constexpr int kRowBytes = kHeadDim / 2;
  static constexpr int kMTiles = kHeadDim / 16;

  struct Tile {
    uint32_t k[2][kGroups][2];
    uint32_t kp[2][kGroups];
    uint32_t v[4][kGroups];
    uint32_t vp[4];
  };
  struct QFrag {
    uint32_t b[kGroups][2][2][2];  // [group][word][low/high nibbles][b0/b1]
    float qsum[kGroups][2];        // Σq over the group, heads 2t and 2t + 1
  };

  const uint8_t* k;
  const uint32_t* kp;  // {scale, minimum} fp16 pairs as words, kGroups per token
  const uint8_t* v;
  const uint32_t* vp;

  __device__ Q4Tiles(const Params& p, int64_t head_row0) {
    k = static_cast<const uint8_t*>(p.k) + head_row0 * kRowBytes;
    v = static_cast<const uint8_t*>(p.v) + head_row0 * kRowBytes;
    kp = reinterpret_cast<const uint32_t*>(p.k_params) + head_row0 * kGroups;
    vp = reinterpret_cast<const uint32_t*>(p.v_params) + head_row0 * kGroups;
  }

  __device__ static QFrag MakeQFrag(const float (*q)[kHeadDim], int g, int t) {
    QFrag f;
#pragma unroll
    for (int gr = 0; gr < kGroups; ++gr) {
#pragma unroll
      for (int w = 0; w < 2; ++w) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int j = 64 * gr + 8 * t + 4 * w + 32 * hi;
          f.b[gr][w][hi][0] = PackHalf2(q[g][j], q[g][j + 2]);
          f.b[gr][w][hi][1] = PackHalf2(q[g][j + 1], q[g][j + 3]);
        }
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float sum = 0.0f;
        for (int d = 0; d < 64; ++d) sum += q[2 * t + e][64 * gr + d];
        f.qsum[gr][e] = sum;
      }
    }
    return f;
  }

  // Loads tile rows [r0, r0 + 16); rows outside [lo, hi) read as zeros (codes and parameters),
  // so padding and unwritten slots can never inject NaN.
  __device__ Tile Load(int r0, int lo, int hi, int g, int t) const {
    Tile tile;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = r0 + g + 8 * i;
      const bool ok = r >= lo && r < hi;
#pragma unroll
      for (int gr = 0; gr < kGroups; ++gr) {
        const uint2 c = LoadU64(k + static_cast<int64_t>(r) * kRowBytes + 32 * gr + 8 * t, ok);
        tile.k[i][gr][0] = c.x;
        tile.k[i][gr][1] = c.y;
      }
      if constexpr (kGroups == 2) {
        const uint2 pr = LoadU64(kp + static_cast<int64_t>(r) * 2, ok);
        tile.kp[i][0] = pr.x;
        tile.kp[i][1] = pr.y;
      } else {
        tile.kp[i][0] = LoadU32(kp + r, ok);
      }
    }
    const int vgroup = (4 * kGroups * g) / 32;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = r0 + 2 * t + (i & 1) + 8 * (i >> 1);
      const bool ok = r >= lo && r < hi;
      const uint8_t* row = v + static_cast<int64_t>(r) * kRowBytes + 4 * kGroups * g;
      if constexpr (kGroups == 2) {
        const uint2 c = LoadU64(row, ok);
        tile.v[i][0] = c.x;
        tile.v[i][1] = c.y;
      } else {
        tile.v[i][0] = LoadU32(row, ok);
      }
      tile.vp[i] = LoadU32(vp + static_cast<int64_t>(r) * kGroups + vgroup, ok);
    }
    return tile;
  }

  // s[0..3] = scores (log2 units) of (token g, head 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
  __device__ static void Scores(const Tile& tile, const QFrag& f, float (&s)[4]) {
    float acc[kGroups][4];
#pragma unroll
    for (int gr = 0; gr < kGroups; ++gr) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[gr][i] = 0.0f;
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const uint32_t tok_g = tile.k[0][gr][w];   // A rows g
        const uint32_t tok_g8 = tile.k[1][gr][w];  // A rows g + 8
        const uint32_t a_lo[4] = {HalfBits2(Nibbles<0>(tok_g)), HalfBits2(Nibbles<0>(tok_g8)),
                                  HalfBits2(Nibbles<8>(tok_g)), HalfBits2(Nibbles<8>(tok_g8))};
        MmaF16(acc[gr], a_lo, f.b[gr][w][0]);
        const uint32_t a_hi[4] = {HalfBits2(Nibbles<4>(tok_g)), HalfBits2(Nibbles<4>(tok_g8)),
                                  HalfBits2(Nibbles<12>(tok_g)), HalfBits2(Nibbles<12>(tok_g8))};
        MmaF16(acc[gr], a_hi, f.b[gr][w][1]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float sc = 0.0f;
#pragma unroll
      for (int gr = 0; gr < kGroups; ++gr) {
        const __half2 pm = Half2FromBits(tile.kp[i >> 1][gr]);
        sc += __low2float(pm) * acc[gr][i] + __high2float(pm) * f.qsum[gr][i & 1];
      }
      s[i] = sc;
    }
  }

  // o[m][..] += V^T P^T for this tile; pb is the P^T fragment (tokens x heads).
  __device__ static void AccumulateV(const Tile& tile, const uint32_t (&pb)[2],
                                     float (&o)[kMTiles][4]) {
    const __half2 s_ab = __lows2half2(Half2FromBits(tile.vp[0]), Half2FromBits(tile.vp[1]));
    const __half2 m_ab = __highs2half2(Half2FromBits(tile.vp[0]), Half2FromBits(tile.vp[1]));
    const __half2 s_cd = __lows2half2(Half2FromBits(tile.vp[2]), Half2FromBits(tile.vp[3]));
    const __half2 m_cd = __highs2half2(Half2FromBits(tile.vp[2]), Half2FromBits(tile.vp[3]));
#pragma unroll
    for (int w = 0; w < kGroups; ++w) {
      // Byte pairs of two tokens side by side: bytes 0,1 (x) and 2,3 (y) of each word.
      const uint32_t x_ab = __byte_perm(tile.v[0][w], tile.v[1][w], 0x5410);
      const uint32_t y_ab = __byte_perm(tile.v[0][w], tile.v[1][w], 0x7632);
      const uint32_t x_cd = __byte_perm(tile.v[2][w], tile.v[3][w], 0x5410);
      const uint32_t y_cd = __byte_perm(tile.v[2][w], tile.v[3][w], 0x7632);
      {
        const uint32_t a[4] = {HalfBits2(__hfma2(Nibbles<0>(x_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<4>(x_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<0>(x_cd), s_cd, m_cd)),
                               HalfBits2(__hfma2(Nibbles<4>(x_cd), s_cd, m_cd))};
        MmaF16(o[4 * w + 0], a, pb);
      }
      {
        const uint32_t a[4] = {HalfBits2(__hfma2(Nibbles<8>(x_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<12>(x_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<8>(x_cd), s_cd, m_cd)),
                               HalfBits2(__hfma2(Nibbles<12>(x_cd), s_cd, m_cd))};
        MmaF16(o[4 * w + 1], a, pb);
      }
      {
        const uint32_t a[4] = {HalfBits2(__hfma2(Nibbles<0>(y_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<4>(y_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<0>(y_cd), s_cd, m_cd)),
                               HalfBits2(__hfma2(Nibbles<4>(y_cd), s_cd, m_cd))};
        MmaF16(o[4 * w + 2], a, pb);
      }
      {
        const uint32_t a[4] = {HalfBits2(__hfma2(Nibbles<8>(y_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<12>(y_ab), s_ab, m_ab)),
                               HalfBits2(__hfma2(Nibbles<8>(y_cd), s_cd, m_cd)),
                               HalfBits2(__hfma2(Nibbles<12>(y_cd), s_cd, m_cd))};
        MmaF16(o[4 * w + 3], a, pb);
      }
    }
  }

  // The head-dimension index of O^T row g (upper = 0) or g + 8 (upper = 1) of m-tile m.
  __device__ static int DimOf(int m, int upper, int g) {
    const int byte = 4 * kGroups * g + 4 * (m / 4) + m % 4;  // byte of the code row
    return 64 * (byte / 32) + byte % 32 + 32 * upper;
  }
};

// The fp16 cache. Lane (g, t):
//   K: tokens r0+g and r0+g+8, 16-byte chunks c = 4i + t (dims 8c..8c+7); chunk i feeds k-steps
//      (i, dims 8c..8c+3) and (i, dims 8c+4..8c+7).
//   V: tokens r0+2t, +1, +8, +9, chunks c = g·kChunksV + k; word j of chunk k gives m-tile 4k + j,
//      dim 8c + 2j for O^T row g and 8c + 2j + 1 for row g + 8.
template <int kHeadDim>
struct F16Tiles {
  static constexpr int kChunksK = kHeadDim / 32;
  static constexpr int kChunksV = kHeadDim / 64;
  static constexpr int kStages = 2;
  static constexpr int kMTiles = kHeadDim / 16;

  struct Tile {
    uint4 k[2][kChunksK];
    uint4 v[4][kChunksV];
  };
  struct QFrag {
    uint32_t b[kChunksK][2][2];
  };

  const __half* k;
  const __half* v;

  __device__ F16Tiles(const Params& p, int64_t head_row0) {
    k = static_cast<const __half*>(p.k) + head_row0 * kHeadDim;
    v = static_cast<const __half*>(p.v) + head_row0 * kHeadDim;
  }

  __device__ static QFrag MakeQFrag(const float (*q)[kHeadDim], int g, int t) {
    QFrag f;
#pragma unroll
    for (int i = 0; i < kChunksK; ++i) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int j = 8 * (4 * i + t) + 4 * hi;
        f.b[i][hi][0] = PackHalf2(q[g][j], q[g][j + 1]);
        f.b[i][hi][1] = PackHalf2(q[g][j + 2], q[g][j + 3]);
      }
    }
    return f;
  }

  __device__ Tile Load(int r0, int lo, int hi, int g, int t) const {
    Tile tile;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = r0 + g + 8 * i;
      const bool ok = r >= lo && r < hi;
#pragma unroll
      for (int c = 0; c < kChunksK; ++c) {
        tile.k[i][c] = LoadU128(k + static_cast<int64_t>(r) * kHeadDim + 8 * (4 * c + t), ok);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = r0 + 2 * t + (i & 1) + 8 * (i >> 1);
      const bool ok = r >= lo && r < hi;
#pragma unroll
      for (int c = 0; c < kChunksV; ++c) {
        tile.v[i][c] =
            LoadU128(v + static_cast<int64_t>(r) * kHeadDim + 8 * (g * kChunksV + c), ok);
      }
    }
    return tile;
  }

  __device__ static void Scores(const Tile& tile, const QFrag& f, float (&s)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunksK; ++c) {
      const uint32_t a_lo[4] = {tile.k[0][c].x, tile.k[1][c].x, tile.k[0][c].y, tile.k[1][c].y};
      MmaF16(s, a_lo, f.b[c][0]);
      const uint32_t a_hi[4] = {tile.k[0][c].z, tile.k[1][c].z, tile.k[0][c].w, tile.k[1][c].w};
      MmaF16(s, a_hi, f.b[c][1]);
    }
  }

  __device__ static void AccumulateV(const Tile& tile, const uint32_t (&pb)[2],
                                     float (&o)[kMTiles][4]) {
#pragma unroll
    for (int c = 0; c < kChunksV; ++c) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t va = Word(tile.v[0][c], j), vb = Word(tile.v[1][c], j);
        const uint32_t vc = Word(tile.v[2][c], j), vd = Word(tile.v[3][c], j);
        const uint32_t a[4] = {__byte_perm(va, vb, 0x5410), __byte_perm(va, vb, 0x7632),
                               __byte_perm(vc, vd, 0x5410), __byte_perm(vc, vd, 0x7632)};
        MmaF16(o[4 * c + j], a, pb);
      }
    }
  }

  __device__ static int DimOf(int m, int upper, int g) {
    return 8 * (g * kChunksV + m / 4) + 2 * (m % 4) + upper;
  }
};

template <class Tiles, int kHeadDim>
__global__ void __launch_bounds__(kThreads) DecodeAttentionKernel(Params p) {
  constexpr int kMTiles = kHeadDim / 16;
  constexpr int kStages = Tiles::kStages;
  __shared__ float s_q[kHeadsPerTile][kHeadDim];
  __shared__ float s_o[kWarps][kHeadsPerTile][kHeadDim];
  __shared__ float s_m[kWarps][kHeadsPerTile];
  __shared__ float s_l[kWarps][kHeadsPerTile];

  const DecodeAttentionShape& s = p.s;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int split = blockIdx.x;
  const int head_tile = blockIdx.y % p.head_tiles;
  const int kv_head = blockIdx.y / p.head_tiles;
  const int b = blockIdx.z;
  const int group = s.num_heads / s.num_kv_heads;
  const int head0 = kv_head * group + head_tile * kHeadsPerTile;
  const int heads_here = min(kHeadsPerTile, group - head_tile * kHeadsPerTile);

  // The head tile's queries, rotated like the keys when asked, scaled into log2 units and rounded
  // to fp16: exactly the MMA operand, so Σq below matches what the tensor cores multiply.
  const float q_mul = s.scale * kLog2e *
                      LoadQueryRows<kHeadsPerTile, kHeadDim, kThreads>(
                          s_q, p.q + (static_cast<int64_t>(b) * s.num_heads + head0) * kHeadDim,
                          heads_here, s.keys_rotated);
  for (int i = threadIdx.x; i < kHeadsPerTile * kHeadDim; i += kThreads) {
    float& x = s_q[i / kHeadDim][i % kHeadDim];
    x = __half2float(__float2half_rn(x * q_mul));
  }
  __syncthreads();
  const typename Tiles::QFrag qf = Tiles::MakeQFrag(s_q, g, t);

  // This block's tiles: split `split` of the sequence's tiles overlapping [lo, hi).
  const int lo = max(p.start[b], 0);
  const int hi = s.cache_len;
  const int first_tile = lo / kTileTokens;
  const int num_tiles = lo < hi ? (hi + kTileTokens - 1) / kTileTokens - first_tile : 0;
  const int per_split = (num_tiles + p.num_splits - 1) / p.num_splits;
  const int split_begin = first_tile + split * per_split;
  const int split_end = min(split_begin + per_split, first_tile + num_tiles);
  const int my_first = split_begin + warp;
  const int my_count = split_end > my_first ? (split_end - my_first + kWarps - 1) / kWarps : 0;

  const Tiles tiles(p, (static_cast<int64_t>(b) * s.num_kv_heads + kv_head) * s.max_len);
  float m_run[2] = {-INFINITY, -INFINITY};  // heads 2t, 2t+1 (log2 units)
  float l_run[2] = {0.0f, 0.0f};            // this lane's share of the softmax denominators
  float o[kMTiles][4];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[m][i] = 0.0f;
  }

  typename Tiles::Tile buf[kStages];
#pragma unroll
  for (int st = 0; st < kStages; ++st) {
    if (st < my_count) buf[st] = tiles.Load((my_first + st * kWarps) * kTileTokens, lo, hi, g, t);
  }
  for (int base = 0; base < my_count; base += kStages) {
#pragma unroll
    for (int st = 0; st < kStages; ++st) {
      const int i = base + st;
      if (i < my_count) {
        const int r0 = (my_first + i * kWarps) * kTileTokens;
        float sc[4];
        Tiles::Scores(buf[st], qf, sc);
        const bool ok_lo = r0 + g >= lo && r0 + g < hi;
        const bool ok_hi = r0 + g + 8 >= lo && r0 + g + 8 < hi;
        sc[0] = ok_lo ? sc[0] : -INFINITY;
        sc[1] = ok_lo ? sc[1] : -INFINITY;
        sc[2] = ok_hi ? sc[2] : -INFINITY;
        sc[3] = ok_hi ? sc[3] : -INFINITY;
        // Online softmax per head; a head's 16 scores live in the 8 lanes that share t.
        float tile_max[2] = {fmaxf(sc[0], sc[2]), fmaxf(sc[1], sc[3])};
        float alpha[2];
        float use[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          for (int offset = 4; offset < 32; offset *= 2) {
            tile_max[e] = fmaxf(tile_max[e], __shfl_xor_sync(kFullMask, tile_max[e], offset));
          }
          const float m_new = fmaxf(m_run[e], tile_max[e]);
          use[e] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: avoid inf - inf
          alpha[e] = exp2f(m_run[e] - use[e]);
          m_run[e] = m_new;
        }
        const __half2 p_even = __floats2half2_rn(exp2f(sc[0] - use[0]), exp2f(sc[2] - use[0]));
        const __half2 p_odd = __floats2half2_rn(exp2f(sc[1] - use[1]), exp2f(sc[3] - use[1]));
        // Sum the rounded probabilities: the weights the MMA uses then sum to the denominator.
        l_run[0] = l_run[0] * alpha[0] + (__low2float(p_even) + __high2float(p_even));
        l_run[1] = l_run[1] * alpha[1] + (__low2float(p_odd) + __high2float(p_odd));
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          o[m][0] *= alpha[0];
          o[m][1] *= alpha[1];
          o[m][2] *= alpha[0];
          o[m][3] *= alpha[1];
        }
        // Transpose P^T from the score layout (tokens g, g+8 x heads 2t, 2t+1) to the B fragment
        // layout (tokens 2t, 2t+1 | 2t+8, 2t+9 x head g): the two source lanes hold tokens 2t
        // and 2t+1 (with +8 beside them) and head g in their even or odd pair.
        const int src = 8 * t + g / 2;
        const uint32_t e_bits = HalfBits2(p_even);
        const uint32_t o_bits = HalfBits2(p_odd);
        const uint32_t x_even = __shfl_sync(kFullMask, e_bits, src);
        const uint32_t x_odd = __shfl_sync(kFullMask, o_bits, src);
        const uint32_t y_even = __shfl_sync(kFullMask, e_bits, src + 4);
        const uint32_t y_odd = __shfl_sync(kFullMask, o_bits, src + 4);
        const uint32_t x = (g & 1) ? x_odd : x_even;  // {P[2t][g], P[2t+8][g]}
        const uint32_t y = (g & 1) ? y_odd : y_even;  // {P[2t+1][g], P[2t+9][g]}
        const uint32_t pb[2] = {__byte_perm(x, y, 0x5410), __byte_perm(x, y, 0x7632)};
        Tiles::AccumulateV(buf[st], pb, o);
        if (i + kStages < my_count) {
          buf[st] = tiles.Load((my_first + (i + kStages) * kWarps) * kTileTokens, lo, hi, g, t);
        }
      }
    }
  }

  // Merge the warps: each publishes its running max, denominator and unnormalised output.
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    for (int offset = 4; offset < 32; offset *= 2) {
      l_run[e] += __shfl_xor_sync(kFullMask, l_run[e], offset);
    }
  }
  if (g == 0) {
    s_m[warp][2 * t] = m_run[0];
    s_m[warp][2 * t + 1] = m_run[1];
    s_l[warp][2 * t] = l_run[0];
    s_l[warp][2 * t + 1] = l_run[1];
  }
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int upper = 0; upper < 2; ++upper) {
      const int d = Tiles::DimOf(m, upper, g);
      s_o[warp][2 * t][d] = o[m][2 * upper];
      s_o[warp][2 * t + 1][d] = o[m][2 * upper + 1];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kHeadsPerTile * kHeadDim; i += kThreads) {
    const int hh = i / kHeadDim;
    const int d = i % kHeadDim;
    if (hh >= heads_here) continue;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, s_m[w][hh]);
    float acc = 0.0f;
    float l_all = 0.0f;
    if (m_all != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(s_m[w][hh] - m_all);
        acc += f * s_o[w][hh][d];
        l_all += f * s_l[w][hh];
      }
    }
    const float value = l_all > 0.0f ? acc / l_all : 0.0f;
    const int64_t row = static_cast<int64_t>(b) * s.num_heads + head0 + hh;
    if (p.num_splits == 1) {
      p.out[row * kHeadDim + d] = value;
    } else {
      p.partial_out[(row * p.num_splits + split) * kHeadDim + d] = value;
      if (d == 0) {
        p.partial_lse[row * p.num_splits + split] = l_all > 0.0f ? m_all + log2f(l_all) : -INFINITY;
      }
    }
  }
}

// One block per (sequence, query head): out = Σ_s 2^(lse_s - max) o_s / Σ_s 2^(lse_s - max).
__global__ void MergeSplitsKernel(int num_splits, int head_dim, const float* partial_out,
                                  const float* partial_lse, float* out) {
  const int64_t row = blockIdx.x;
  const float* lse = partial_lse + row * num_splits;
  float m_all = -INFINITY;
  for (int sp = 0; sp < num_splits; ++sp) m_all = fmaxf(m_all, lse[sp]);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    float weight = 0.0f;
    if (m_all != -INFINITY) {
      for (int sp = 0; sp < num_splits; ++sp) {
        const float f = exp2f(lse[sp] - m_all);
        acc += f * partial_out[(row * num_splits + sp) * head_dim + d];
        weight += f;
      }
    }
    out[row * head_dim + d] = weight > 0.0f ? acc / weight : 0.0f;
  }
}

inline int HeadTiles(const DecodeAttentionShape& s) {
  const int group = s.num_heads / s.num_kv_heads;
  return (group + kHeadsPerTile - 1) / kHeadsPerTile;
}

inline bool ShapeValid(const DecodeAttentionShape& s) {
  return s.batch >= 0 && s.num_kv_heads > 0 && s.num_heads > 0 &&
         s.num_heads % s.num_kv_heads == 0 && s.cache_len >= 0 && s.cache_len <= s.max_len &&
         s.batch <= 65535 && static_cast<int64_t>(s.num_kv_heads) * HeadTiles(s) <= 65535;
}

inline bool Aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <class Tiles, int kHeadDim>
cudaError_t Run(const Params& p_in, void* workspace, cudaStream_t stream) {
  Params p = p_in;
  p.head_tiles = HeadTiles(p.s);
  if (p.s.batch == 0) return cudaSuccess;
  if (p.num_splits > 1) {
    if (workspace == nullptr || !Aligned(workspace, 16)) return cudaErrorInvalidValue;
    p.partial_out = static_cast<float*>(workspace);
    p.partial_lse = p.partial_out + static_cast<int64_t>(p.s.batch) * p.s.num_heads *
                                        p.num_splits * kHeadDim;
  }
  const dim3 grid(p.num_splits, p.s.num_kv_heads * p.head_tiles, p.s.batch);
  DecodeAttentionKernel<Tiles, kHeadDim><<<grid, kThreads, 0, stream>>>(p);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || p.num_splits == 1) return err;
  MergeSplitsKernel<<<p.s.batch * p.s.num_heads, 128, 0, stream>>>(
      p.num_splits, kHeadDim, p.partial_out, p.partial_lse, p.out);
  return cudaGetLastError();
}

template <class Tiles, int kHeadDim>
cudaError_t Plan(const DecodeAttentionShape& s, DecodeAttentionPlan* plan) {
  int device = 0;
  int sms = 0;
  int blocks_per_sm = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  if (err == cudaSuccess) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks_per_sm, DecodeAttentionKernel<Tiles, kHeadDim>, kThreads, 0);
  }
  if (err != cudaSuccess) return err;
  const int64_t base = static_cast<int64_t>(s.batch) * s.num_kv_heads * HeadTiles(s);
  const int64_t resident = static_cast<int64_t>(sms) * (blocks_per_sm > 0 ? blocks_per_sm : 1);
  const int64_t max_tiles = (static_cast<int64_t>(s.max_len) + kTileTokens - 1) / kTileTokens;
  int64_t most = max_tiles / kMinTilesPerSplit;
  most = most < 1 ? 1 : (most > kMaxSplits ? kMaxSplits : most);
  // Fewest splits whose blocks fill their last wave well (>= 95% of it), else the best filling:
  // with 432 blocks on 396 slots one split would leave the second wave 9% full and halve speed.
  int64_t splits = 1;
  double best = 0.0;
  for (int64_t sp = 1; sp <= most && base > 0; ++sp) {
    const int64_t blocks = base * sp;
    const int64_t waves = (blocks + resident - 1) / resident;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * resident);
    if (fill > best + 1e-9) {
      best = fill;
      splits = sp;
    }
    if (fill >= 0.95) break;
  }
  plan->num_splits = static_cast<int>(splits);
  plan->workspace_bytes =
      splits > 1 ? static_cast<size_t>(s.batch) * s.num_heads * splits * (kHeadDim + 1) *
                       sizeof(float)
                 : 0;
  return cudaSuccess;
}

}  // namespace decode

// ---- launchers ----

// Plans the split of the sequence for `s` on the current device. Call once per shape (batch,
// heads, head_dim, max_len); the plan holds for every cache_len <= max_len.
// REQUIRES: head_dim 64 or 128; num_heads a multiple of num_kv_heads.
inline cudaError_t PlanDecodeAttention(const DecodeAttentionShape& s, DecodeCacheKind kind,
                                       DecodeAttentionPlan* plan) {
  if (!decode::ShapeValid(s)) return cudaErrorInvalidValue;
  STRATA_DISPATCH_DECODE_HEAD_DIM(s.head_dim, kHeadDim, {
    if (kind == DecodeCacheKind::kQ4) {
      return decode::Plan<decode::Q4Tiles<kHeadDim>, kHeadDim>(s, plan);
    }
    return decode::Plan<decode::F16Tiles<kHeadDim>, kHeadDim>(s, plan);
  });
  return cudaSuccess;
}

// Decode attention over the 4-bit cache: planes k_codes/k_params and v_codes/v_params as in
// kernels/kv_q4_format.h (device memory, [batch, num_kv_heads, max_len, ...]); q, out, start
// (int[batch]) device memory. `workspace` holds plan.workspace_bytes (may be null when 0).
// REQUIRES: head_dim 64 or 128 (a power of two, so keys_rotated is always possible); code planes
// 16-byte and parameter planes 8-byte aligned; plan made for this shape.
inline cudaError_t DecodeAttentionQ4(const DecodeAttentionShape& s, const float* q,
                                     const uint8_t* k_codes, const __half* k_params,
                                     const uint8_t* v_codes, const __half* v_params,
                                     const int* start, const DecodeAttentionPlan& plan,
                                     void* workspace, float* out, cudaStream_t stream) {
  if (!decode::ShapeValid(s) || plan.num_splits < 1) return cudaErrorInvalidValue;
  if (!decode::Aligned(k_codes, 16) || !decode::Aligned(v_codes, 16) ||
      !decode::Aligned(k_params, 8) || !decode::Aligned(v_params, 8)) {
    return cudaErrorInvalidValue;
  }
  decode::Params p;
  p.s = s;
  p.q = q;
  p.start = start;
  p.out = out;
  p.k = k_codes;
  p.v = v_codes;
  p.k_params = k_params;
  p.v_params = v_params;
  p.num_splits = plan.num_splits;
  STRATA_DISPATCH_DECODE_HEAD_DIM(s.head_dim, kHeadDim, {
    return decode::Run<decode::Q4Tiles<kHeadDim>, kHeadDim>(p, workspace, stream);
  });
  return cudaSuccess;
}

// Decode attention over an fp16 cache k, v [batch, num_kv_heads, max_len, head_dim] (device
// memory, 16-byte aligned); everything else as DecodeAttentionQ4.
inline cudaError_t DecodeAttentionF16(const DecodeAttentionShape& s, const float* q,
                                      const __half* k, const __half* v, const int* start,
                                      const DecodeAttentionPlan& plan, void* workspace,
                                      float* out, cudaStream_t stream) {
  if (!decode::ShapeValid(s) || plan.num_splits < 1) return cudaErrorInvalidValue;
  if (!decode::Aligned(k, 16) || !decode::Aligned(v, 16)) return cudaErrorInvalidValue;
  decode::Params p;
  p.s = s;
  p.q = q;
  p.start = start;
  p.out = out;
  p.k = k;
  p.v = v;
  p.num_splits = plan.num_splits;
  STRATA_DISPATCH_DECODE_HEAD_DIM(s.head_dim, kHeadDim, {
    return decode::Run<decode::F16Tiles<kHeadDim>, kHeadDim>(p, workspace, stream);
  });
  return cudaSuccess;
}

}  // namespace strata::kernels::cuda
