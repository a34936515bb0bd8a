// The tile arithmetic of the tensor-core prefill attention
// (kernels/cuda/attention_prefill_f16.cuh), kept apart from the kernel so that the host compiler
// builds it too and a CPU test checks it against an fp64 reference
// (tests/kernels/attention_prefill_tiles_test.cc).
//
// Layouts and masking are kernels/cpu/attention.h's CausalAttention: the new tokens of every
// sequence occupy cache slots [cache_len - new_tokens, cache_len); sequence b attends keys from
// slot start[b] up to its own slot; a query before start[b] (left padding) gets a zero output.
//
// Rows. A thread block owns one (sequence, KV head) and `rows_per_tile` consecutive rows of the
// packed query matrix of that KV head's group: row r is token r / group, query head
// kv_head * group + r % group, so the heads sharing a KV head share every K/V tile the block
// loads (FlashInfer's GQA packing) and a row's token (hence its causal limit) is r / group.
//
// Keys. A block's key tiles start at its sequence's first real key (so no tile needs a left
// mask) and end at its last row's slot; only the tiles that reach past its first row's slot can
// hold a key after some row's slot, so only those are masked.
//
// Softmax. Scores live in the log2 domain (score * scale * log2(e)) so the kernel needs one
// exp2 per score; the running maximum m of a row starts at -inf and stays there while the row has
// seen no key, so the exponent base used is 0 then (MaxForExp) and every factor is exp2(-inf) = 0.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define STRATA_PREFILL_HD __host__ __device__ __forceinline__
#else
#define STRATA_PREFILL_HD inline
#endif

namespace strata::kernels::prefill_tiles {

inline constexpr float kLog2e = 1.4426950408889634f;

// The (token, head within the group) of packed row `row`.
STRATA_PREFILL_HD int RowToken(int64_t row, int group) { return static_cast<int>(row / group); }
STRATA_PREFILL_HD int RowHeadInGroup(int64_t row, int group) {
  return static_cast<int>(row % group);
}

// The key tiles of one block of rows [row0, row0 + rows_per_tile) of one sequence.
struct KeyTiles {
  int key_begin = 0;     // slot of the first key of tile 0 (the sequence's first real key)
  int key_end = 0;       // one past the block's last row's slot; keys from here on are not read
  int num_tiles = 0;     // tiles to visit; 0 when every row of the block is padding
  int num_unmasked = 0;  // tiles 0 .. num_unmasked-1 hold no key after any row's slot
};

// REQUIRES: 0 <= row0 < new_tokens * group; first_new_slot = cache_len - new_tokens.
STRATA_PREFILL_HD KeyTiles KeyTilesFor(int first_new_slot, int start, int new_tokens, int group,
                                       int64_t row0, int rows_per_tile, int keys_per_tile) {
  KeyTiles t;
  const int64_t rows_total = static_cast<int64_t>(new_tokens) * group;
  const int64_t last_row =
      (row0 + rows_per_tile < rows_total ? row0 + rows_per_tile : rows_total) - 1;
  const int first_slot = first_new_slot + RowToken(row0, group);
  const int last_slot = first_new_slot + RowToken(last_row, group);
  t.key_begin = start > 0 ? start : 0;
  t.key_end = last_slot + 1;
  const int keys = last_slot + 1 - t.key_begin;
  if (keys <= 0) return t;
  t.num_tiles = (keys + keys_per_tile - 1) / keys_per_tile;
  const int full_keys = first_slot + 1 - t.key_begin;  // keys every row of the block may see
  t.num_unmasked = full_keys > 0 ? full_keys / keys_per_tile : 0;
  return t;
}

// The grid order. Block b of a launch of seq_heads * row_tiles blocks takes the (sequence, KV
// head) pairs in bands of `band` consecutive pairs; a band's blocks visit its row tiles longest
// (last) first, every pair of the band at one row tile before the next. The blocks running at
// once then read the K/V of one or two bands, which stay in L2 (the band is sized for that), and
// the longest rows of each band start before its short ones, which evens out the causal triangle.
struct BlockTile {
  int64_t seq_head = 0;  // b * num_kv_heads + kv_head
  int64_t row_tile = 0;  // the block's rows are [row_tile * rows_per_tile, ...)
};

// REQUIRES: 0 <= block < seq_heads * row_tiles; band >= 1.
STRATA_PREFILL_HD BlockTile BlockTileFor(int64_t block, int64_t seq_heads, int64_t row_tiles,
                                         int64_t band) {
  const int64_t band_begin = block / (band * row_tiles) * band;
  const int64_t in_band = block - band_begin * row_tiles;
  const int64_t width = seq_heads - band_begin < band ? seq_heads - band_begin : band;
  BlockTile t;
  t.seq_head = band_begin + in_band % width;
  t.row_tile = row_tiles - 1 - in_band / width;
  return t;
}

// Whether the query at `slot` may attend the key at `key` (key >= start holds by construction).
STRATA_PREFILL_HD bool KeyVisible(int key, int slot) { return key <= slot; }

// The maximum to subtract before exp2: 0 for a row that has seen no key yet.
STRATA_PREFILL_HD float MaxForExp(float m) { return m == -INFINITY ? 0.0f : m; }

STRATA_PREFILL_HD float Exp2(float x) {
#if defined(__CUDA_ARCH__)
  return exp2f(x);
#else
  return std::exp2(x);
#endif
}

// One tile's update of a row's running state: m_new = max(m_old, tile_max) (log2 domain), and the
// factor that rescales the old denominator and output, exp2(m_old - m_new) (0 from an empty row).
STRATA_PREFILL_HD float RescaleFactor(float m_old, float m_new) {
  return Exp2(m_old - MaxForExp(m_new));
}

// A score's unnormalised probability given the row's running maximum (log2 domain), from its raw
// dot product: exp2(dot * scale_log2 - m).
STRATA_PREFILL_HD float Probability(float dot, float scale_log2, float m) {
  return Exp2(dot * scale_log2 - MaxForExp(m));
}

// The output factor of a finished row: 1 / l, or 0 for a row that attended nothing.
STRATA_PREFILL_HD float InverseDenominator(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

}  // namespace strata::kernels::prefill_tiles
