// Internal to attention_q4*.cc: the per-(sequence, KV head) work item that the dispatcher in
// attention_q4.cc prepares and each instruction-set path computes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cpu::q4 {

// Tokens per tile of the SIMD paths (one vector of scores).
inline constexpr int kTile = 16;
// Tiles, and tokens, per online-softmax step of the AVX-512 path.
inline constexpr int kStepTiles = 4;
inline constexpr int kStep = kStepTiles * kTile;

struct Work {
  int heads = 0;  // query heads that share this KV head
  int head_dim = 0;
  int len = 0;                       // attended tokens, >= 1
  const float* q = nullptr;          // [heads, head_dim]: rotated if the keys are, times the scale
  const float* qsum = nullptr;       // [heads, Q4Groups(head_dim)]: sum of q over each group
  // Keys by channel (kv_q4_channel.h) when >= 0: token 0 is token `key_phase` of its key group of
  // kQ4ChannelGroup tokens, and every attended token lies in a written group; k_params is then
  // the row's key params plane at token 0's slot (Q4ChannelParamHalves(head_dim) per slot), and
  // the path folds each group's channel scales into q and its minimums into one score offset.
  // REQUIRES (AVX-512 path): key_phase % kTile == 0, so that no tile of kTile tokens spans two
  // key groups (attention_q4.cc starts a work item at its tile's first token, with `skip`).
  int key_phase = -1;
  // AVX-512 path: the first `skip` (< kTile) tokens are read but left out of the softmax, as if
  // the item started after them (their value params may be anything).
  int skip = 0;
  const uint8_t* k_codes = nullptr;  // row of the first attended slot
  const uint16_t* k_params = nullptr;
  const uint8_t* v_codes = nullptr;
  const uint16_t* v_params = nullptr;
  float* out = nullptr;      // [heads, head_dim]
  float* lse = nullptr;      // when set, [heads]: log Σ exp(score) over the work item's tokens
  float* scratch = nullptr;  // ScratchLayout(heads, head_dim, len).total floats, 64-byte
                             // aligned, owned by the calling thread
};

// Where each scratch region of a work item starts, in floats from Work::scratch; every region
// is a whole number of 64-byte lines. The SIMD paths use these regions (the AVX2 path fills
// only the first half of the vector-sized ones; `part` and `scores` are the AVX2 path's, `qdigits`
// to `vtail` the AVX-512 path's).
struct Layout {
  size_t part;     // per query head and group, one vector of partial dot products per tile token
  size_t kparams;  // the tile's (AVX-512: step's) key scale and minimum per group
  size_t vparams;  // the tile's (AVX-512: step's) value scale and minimum per group
  size_t weights;  // per group and head, the tile's probability x value scale (the AVX-512 path
                   // keeps two steps' worth of digits and scale, kStep + 16 floats per group,
                   // head and step)
  size_t scores;   // per head, `stride` floats: the scores, then the probabilities
  size_t sums;     // per head, vectors: running max then sum, and one per group for the minimum
  size_t acc;      // [heads, head_dim]: output accumulators, in the order values unpack
  size_t corr;     // [2, heads rounded up to 16]: per-tile rescale factors
  size_t qdigits;  // [heads, groups, 6] 64-byte vectors: the query as three signed-byte digits
  size_t qscale;   // [heads, groups] (rounded up to 16): the scale of those digits
  size_t tperm;    // [2, groups] vectors: where each group's token dot products land in a tile
  size_t dots;     // [kStepTiles, heads, groups, kTile] int32: the step's key dot products
  size_t tail;     // kTile rows of key codes: a partial last tile, zero-padded
  size_t quads;    // kStep / 4 x 4 vectors: one group's value codes of a step, four tokens a lane
  size_t vtail;    // 4 rows of one group's value codes: a partial last quad, zero-padded
  size_t chq;      // keys by channel (AVX2): [2, heads, head_dim], q times the channel scales of
                   // the key groups of even and odd index, then [2, head_dim], the latest key
                   // group's channel scales, then its minimums (AVX-512: only [2, head_dim], a
                   // key group's channel scales, then its minimums)
  size_t chbias;   // keys by channel (AVX2): [2, heads rounded up to 16], q·minimums of those
  size_t chtile;   // keys by channel (AVX-512): per tile of a step, [heads, groups] digit scales,
                   // then [heads] q·minimums
  size_t chred;    // keys by channel (AVX-512): [heads, groups] vectors of lane-wise largest |q'|,
                   // [heads] vectors of lane-wise q·minimums, then [heads, groups] (rounded up
                   // to 16) inverse digit scales
  size_t total;
  int stride;  // len rounded up to whole tiles
};

constexpr Layout ScratchLayout(int heads, int head_dim, int len) {
  const size_t h = static_cast<size_t>(heads), g = static_cast<size_t>(head_dim) / 64;
  Layout l{};
  l.stride = (len + kTile - 1) / kTile * kTile;
  l.kparams = l.part + h * g * kTile * 16;
  l.vparams = l.kparams + 2 * g * kStep;
  l.weights = l.vparams + 2 * g * kStep;
  l.scores = l.weights + 2 * g * h * (kStep + 16);
  l.sums = l.scores + h * static_cast<size_t>(l.stride);
  l.acc = l.sums + h * (2 + g) * 16;
  l.corr = l.acc + h * g * 64;
  l.qdigits = l.corr + 2 * ((h + 15) / 16 * 16);
  l.qscale = l.qdigits + h * g * 6 * 16;
  l.tperm = l.qscale + (h * g + 15) / 16 * 16;
  l.dots = l.tperm + 2 * g * 16;
  l.tail = l.dots + h * g * kStep;
  l.quads = l.tail + g * kTile * 32 / 4;
  l.vtail = l.quads + kStep / 4 * 4 * 16;
  l.chq = l.vtail + 4 * 32 / 4;
  l.chbias = l.chq + 2 * (h + 1) * g * 64;
  l.chtile = l.chbias + 2 * ((h + 15) / 16 * 16);
  l.chred = l.chtile + (kStepTiles * h * (g + 1) + 15) / 16 * 16;
  l.total = l.chred + h * g * 16 + h * 16 + (h * g + 15) / 16 * 16;
  return l;
}

// The unit scratch is allocated in, so that it is aligned for 64-byte vector stores.
struct alignas(64) ScratchLine {
  float f[16];
};

// AttendScalar takes every head_dim of the format. REQUIRES (SIMD paths): head_dim % 64 == 0.
void AttendScalar(const Work& w);
void AttendAvx2(const Work& w);
void AttendAvx512(const Work& w);

}  // namespace strata::kernels::cpu::q4
