// The tile arithmetic of the tensor-core prefill attention (kernels/attention_prefill_tiles.h) on
// the CPU: the key-tile ranges against brute force, and the kernel's tile loop (GQA row packing,
// causal tile skipping, masking only the tiles the plan says cross the diagonal, the online
// softmax rescaling) replayed in fp32 against an fp64 reference on odd lengths, left padding and
// chunked prefills.
#include "kernels/attention_prefill_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/kernels/causal_attention_fp64.h"

namespace strata::kernels::prefill_tiles {
namespace {

struct Case {
  int batch, new_tokens, heads, kv_heads, head_dim, cache_len;
  std::vector<int> start;
  int rows_per_tile, keys_per_tile;
};

// The fp64 reference (tests/kernels/causal_attention_fp64.h) of case `c`.
std::vector<double> Reference(const Case& c, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v,
                              double scale) {
  return testing::CausalAttentionFp64({c.batch, c.new_tokens, c.heads, c.kv_heads, c.head_dim,
                                       c.cache_len, c.cache_len, c.start.data()},
                                      q, k, v, scale);
}

// The CUDA kernel's loop, one row at a time, in fp32 through the header's functions.
std::vector<float> TiledAttention(const Case& c, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  float scale) {
  const int d = c.head_dim, group = c.heads / c.kv_heads;
  const int64_t rows_total = static_cast<int64_t>(c.new_tokens) * group;
  const int first_new_slot = c.cache_len - c.new_tokens;
  const float scale_log2 = scale * kLog2e;
  std::vector<float> out(q.size(), NAN);
  // The kernel's grid, in its order, with bands of 3 (sequence, KV head) pairs.
  const int64_t seq_heads = static_cast<int64_t>(c.batch) * c.kv_heads;
  const int64_t row_tiles = (rows_total + c.rows_per_tile - 1) / c.rows_per_tile;
  for (int64_t block = 0; block < seq_heads * row_tiles; ++block) {
    const BlockTile bt = BlockTileFor(block, seq_heads, row_tiles, 3);
    const int b = static_cast<int>(bt.seq_head / c.kv_heads);
    const int kvh = static_cast<int>(bt.seq_head % c.kv_heads);
    const size_t base = (static_cast<size_t>(b) * c.kv_heads + kvh) * c.cache_len;
    const int64_t row0 = bt.row_tile * c.rows_per_tile;
    const KeyTiles kt = KeyTilesFor(first_new_slot, c.start[b], c.new_tokens, group, row0,
                                    c.rows_per_tile, c.keys_per_tile);
    for (int64_t row = row0; row < std::min<int64_t>(row0 + c.rows_per_tile, rows_total); ++row) {
      const int tok = RowToken(row, group);
      const int head = kvh * group + RowHeadInGroup(row, group);
      const int slot = first_new_slot + tok;
      const float* qv =
          q.data() + ((static_cast<size_t>(b) * c.new_tokens + tok) * c.heads + head) * d;
      float m = -INFINITY, l = 0.0f;
      std::vector<float> o(d, 0.0f), p(c.keys_per_tile);
      for (int j = 0; j < kt.num_tiles; ++j) {
        const int key0 = kt.key_begin + j * c.keys_per_tile;
        float mx = -INFINITY;
        for (int n = 0; n < c.keys_per_tile; ++n) {
          const int key = key0 + n;
          float dot = 0.0f;  // keys from key_end on are zero rows, as the kernel loads them
          if (key < kt.key_end) {
            for (int i = 0; i < d; ++i) dot += qv[i] * k[(base + key) * d + i];
          }
          if (j >= kt.num_unmasked && !KeyVisible(key, slot)) dot = -INFINITY;
          p[n] = dot;
          mx = std::max(mx, dot);
        }
        const float m_new = std::max(m, mx * scale_log2);
        const float alpha = RescaleFactor(m, m_new);
        m = m_new;
        float sum = 0.0f;
        for (int n = 0; n < c.keys_per_tile; ++n) sum += (p[n] = Probability(p[n], scale_log2, m));
        l = l * alpha + sum;
        for (int i = 0; i < d; ++i) {
          o[i] *= alpha;
          for (int n = 0; n < c.keys_per_tile; ++n) {
            const int key = key0 + n;
            if (key < kt.key_end) o[i] += p[n] * v[(base + key) * d + i];
          }
        }
      }
      const float inv = slot < c.start[b] ? 0.0f : InverseDenominator(l);
      float* dst =
          out.data() + ((static_cast<size_t>(b) * c.new_tokens + tok) * c.heads + head) * d;
      for (int i = 0; i < d; ++i) dst[i] = o[i] * inv;
    }
  }
  return out;
}

double NormalizedError(const std::vector<double>& ref, const std::vector<float>& got) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / norm);
}

TEST(PrefillTilesTest, KeyTilesCoverExactlyTheVisibleKeys) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    const int group = 1 + static_cast<int>(rng() % 8);
    const int new_tokens = 1 + static_cast<int>(rng() % 300);
    const int cache_len = new_tokens + static_cast<int>(rng() % 3 == 0 ? rng() % 200 : 0);
    const int start = static_cast<int>(rng() % (cache_len + 1));
    const int rows_per_tile = 16 << (rng() % 4);
    const int keys_per_tile = 8 << (rng() % 5);
    const int first_new_slot = cache_len - new_tokens;
    const int64_t rows_total = static_cast<int64_t>(new_tokens) * group;
    for (int64_t row0 = 0; row0 < rows_total; row0 += rows_per_tile) {
      SCOPED_TRACE(::testing::Message()
                   << "group " << group << " new " << new_tokens << " len " << cache_len
                   << " start " << start << " rows " << rows_per_tile << " keys " << keys_per_tile
                   << " row0 " << row0);
      const KeyTiles kt =
          KeyTilesFor(first_new_slot, start, new_tokens, group, row0, rows_per_tile, keys_per_tile);
      const int64_t row_end = std::min<int64_t>(row0 + rows_per_tile, rows_total);
      int min_slot = INT32_MAX, max_slot = -1;
      for (int64_t row = row0; row < row_end; ++row) {
        const int slot = first_new_slot + RowToken(row, group);
        ASSERT_EQ(RowToken(row, group) * group + RowHeadInGroup(row, group), row);
        min_slot = std::min(min_slot, slot);
        max_slot = std::max(max_slot, slot);
      }
      if (max_slot < start) {  // every row is padding: nothing to read
        EXPECT_EQ(kt.num_tiles, 0);
        continue;
      }
      EXPECT_EQ(kt.key_begin, start);
      EXPECT_EQ(kt.key_end, max_slot + 1);
      // The tiles reach every visible key of the block and no tile lies wholly past the last.
      EXPECT_GE(static_cast<int64_t>(kt.num_tiles) * keys_per_tile, kt.key_end - kt.key_begin);
      EXPECT_LT(static_cast<int64_t>(kt.num_tiles - 1) * keys_per_tile, kt.key_end - kt.key_begin);
      // Unmasked tiles hold no key after any row's slot; the first masked one does.
      ASSERT_LE(kt.num_unmasked, kt.num_tiles);
      if (kt.num_unmasked > 0) {
        EXPECT_LE(kt.key_begin + kt.num_unmasked * keys_per_tile - 1, min_slot);
      }
      if (kt.num_unmasked < kt.num_tiles) {
        EXPECT_GT(kt.key_begin + (kt.num_unmasked + 1) * keys_per_tile - 1, min_slot);
      }
    }
  }
}

TEST(PrefillTilesTest, GridOrderVisitsEveryTileOnceLongestFirstWithinBands) {
  for (int64_t seq_heads : {1, 2, 7, 64, 130}) {
    for (int64_t row_tiles : {1, 3, 64}) {
      for (int64_t band : {1, 4, 8, 200}) {
        SCOPED_TRACE(::testing::Message() << "seq_heads " << seq_heads << " row_tiles " << row_tiles
                                          << " band " << band);
        std::vector<int> seen(seq_heads * row_tiles, 0);
        std::vector<int64_t> last_tile(seq_heads, row_tiles);
        for (int64_t block = 0; block < seq_heads * row_tiles; ++block) {
          const BlockTile t = BlockTileFor(block, seq_heads, row_tiles, band);
          ASSERT_GE(t.seq_head, 0);
          ASSERT_LT(t.seq_head, seq_heads);
          ASSERT_GE(t.row_tile, 0);
          ASSERT_LT(t.row_tile, row_tiles);
          ++seen[t.seq_head * row_tiles + t.row_tile];
          // Each pair's tiles come longest (last) first, one at a time.
          ASSERT_EQ(t.row_tile, last_tile[t.seq_head] - 1);
          last_tile[t.seq_head] = t.row_tile;
          // Blocks of one band are consecutive: block / (band * row_tiles) names the band.
          ASSERT_EQ(t.seq_head / band, block / (band * row_tiles));
        }
        for (int n : seen) ASSERT_EQ(n, 1);
      }
    }
  }
}

TEST(PrefillTilesTest, SoftmaxStepsHandleRowsThatSawNothing) {
  EXPECT_EQ(RescaleFactor(-INFINITY, -INFINITY), 0.0f);
  EXPECT_EQ(RescaleFactor(-INFINITY, 3.0f), 0.0f);
  EXPECT_FLOAT_EQ(RescaleFactor(1.0f, 3.0f), 0.25f);
  EXPECT_EQ(Probability(-INFINITY, 0.5f, -INFINITY), 0.0f);
  EXPECT_FLOAT_EQ(Probability(4.0f, 0.5f, 1.0f), 2.0f);
  EXPECT_EQ(InverseDenominator(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(InverseDenominator(4.0f), 0.25f);
}

TEST(PrefillTilesTest, TiledLoopMatchesFp64OnOddLengths) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 16, 1, {0}, 16, 8},
      {2, 37, 4, 1, 16, 37, {0, 5}, 16, 8},
      {3, 29, 6, 2, 24, 53, {0, 40, 53}, 64, 16},  // chunked prefill; one fully padded sequence
      {2, 101, 8, 1, 8, 101, {99, 3}, 64, 64},
      {1, 77, 3, 3, 32, 77, {0}, 32, 64},
      {2, 63, 8, 8, 16, 65, {1, 64}, 128, 32},
      {4, 13, 12, 4, 8, 13, {0, 1, 12, 13}, 16, 8},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " new " << c.new_tokens << " heads "
                                      << c.heads << "/" << c.kv_heads << " len " << c.cache_len
                                      << " tile " << c.rows_per_tile << "x" << c.keys_per_tile);
    const size_t q_n = static_cast<size_t>(c.batch) * c.new_tokens * c.heads * c.head_dim;
    const size_t kv_n = static_cast<size_t>(c.batch) * c.kv_heads * c.cache_len * c.head_dim;
    std::vector<float> q(q_n), k(kv_n), v(kv_n);
    for (float& x : q) x = normal(rng);
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const std::vector<float> got = TiledAttention(c, q, k, v, scale);
    EXPECT_LT(NormalizedError(Reference(c, q, k, v, scale), got), 1e-5);
    for (float x : got) ASSERT_FALSE(std::isnan(x));
  }
}

}  // namespace
}  // namespace strata::kernels::prefill_tiles
