// Internal to attention_q4*.cc: the per-(sequence, KV head) work item that the dispatcher in
// attention_q4.cc prepares and each instruction-set path computes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cpu::q4 {

// Tokens per tile of the SIMD paths (the online-softmax step).
inline constexpr int kTile = 16;

struct Work {
  int heads = 0;  // query heads that share this KV head
  int head_dim = 0;
  int len = 0;                       // attended tokens, >= 1
  const float* q = nullptr;          // [heads, head_dim]: rotated if the keys are, times the scale
  const float* qsum = nullptr;       // [heads, head_dim / G]: sum of q over each group
  const uint8_t* k_codes = nullptr;  // row of the first attended slot
  const uint16_t* k_params = nullptr;
  const uint8_t* v_codes = nullptr;
  const uint16_t* v_params = nullptr;
  float* out = nullptr;      // [heads, head_dim]
  float* scratch = nullptr;  // ScratchLayout(heads, head_dim, len).total floats, 64-byte
                             // aligned, owned by the calling thread
};

// Where each scratch region of a work item starts, in floats from Work::scratch; every region
// is a whole number of 64-byte lines. The SIMD paths use these regions (the AVX2 path fills
// only the first half of the vector-sized ones; `scores` is the AVX2 path's, `qperm` and `acc`
// the AVX-512 path's).
struct Layout {
  size_t part;     // per query head and group, one vector of partial dot products per tile token
  size_t kparams;  // the tile's key scale and minimum per group
  size_t vparams;  // the tile's value scale and minimum per group
  size_t weights;  // per group and head, the tile's probability x value scale (the AVX-512 path
                   // keeps two tiles' worth, the second one g * h * kTile floats further)
  size_t scores;   // per head, `stride` floats: the scores, then the probabilities
  size_t sums;     // per head, vectors: running max then sum, and one per group for the minimum
  size_t qperm;    // [heads, head_dim]: the query in the order the AVX-512 path unpacks codes
  size_t acc;      // [heads, head_dim]: the AVX-512 path's output accumulators, in that order
  size_t corr;     // [2, heads rounded up to 16]: the AVX-512 path's per-tile rescale factors
  size_t total;
  int stride;  // len rounded up to whole tiles
};

constexpr Layout ScratchLayout(int heads, int head_dim, int len) {
  const size_t h = static_cast<size_t>(heads), g = static_cast<size_t>(head_dim) / 64;
  Layout l{};
  l.stride = (len + kTile - 1) / kTile * kTile;
  l.kparams = l.part + h * g * kTile * 16;
  l.vparams = l.kparams + 2 * g * kTile;
  l.weights = l.vparams + 2 * g * kTile;
  l.scores = l.weights + 2 * g * h * kTile;
  l.sums = l.scores + h * static_cast<size_t>(l.stride);
  l.qperm = l.sums + h * (2 + g) * 16;
  l.acc = l.qperm + h * g * 64;
  l.corr = l.acc + h * g * 64;
  l.total = l.corr + 2 * ((h + 15) / 16 * 16);
  return l;
}

// The unit scratch is allocated in, so that it is aligned for 64-byte vector stores.
struct alignas(64) ScratchLine {
  float f[16];
};

// REQUIRES (SIMD paths): head_dim % 64 == 0.
void AttendScalar(const Work& w);
void AttendAvx2(const Work& w);
void AttendAvx512(const Work& w);

}  // namespace strata::kernels::cpu::q4
