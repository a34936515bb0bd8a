// The AVX-512 path of DecodeAttentionQ4 (see attention_q4.h). Compiled for AVX-512 (F, BW, DQ,
// VL, VBMI, VNNI) by function attributes only, so the library still runs on CPUs without it;
// attention_q4.cc dispatches here after checking the CPU at run time.
//
// One pass over the work item, 64 tokens (a step of four 16-token tiles) at a time, with an online
// softmax: the step's key codes give its scores, the scores update the softmax state, and the
// step's value codes are weighted by the probabilities, so scores never leave L1. Keys are dotted
// with the query in exact integer arithmetic (VNNI, the query split into signed-byte digits, see
// kQMax); value codes are widened by bit manipulation only (no integer-to-float conversion, see
// Unpacker): each lane holds x = 2 + n/8 for its code n, and the algebra absorbs the offset: per
// group p·v' = 8·scale·(p·x) + (minimum - 16·scale)·Σp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/attention_q4_paths.h"

// GCC 12's AVX-512 intrinsics build their pass-through operand from _mm512_undefined_*(), which
// -W(maybe-)uninitialized flag once inlined here (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define STRATA_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512vnni,fma,f16c")))
#define STRATA_AVX512_INLINE STRATA_AVX512 __attribute__((always_inline)) inline
#define STRATA_AVX512_OUTLINE STRATA_AVX512 __attribute__((noinline))

namespace strata::kernels::cpu::q4 {
namespace {

// e^x for x <= 16 (Cephes expf: about 1 ulp), flushing below e^-87 towards zero.
STRATA_AVX512_INLINE __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

// Which element of its 64-element group lane i % 16 of unpacked vector i / 16 holds (Unpacker).
constexpr int Element(int i) { return 8 * (i % 16 / 2) + 2 * (i / 16) + i % 2; }

// Widens the 32 value-code bytes of a group (64 nibbles) into 4 vectors of x = 2 + n/8:
// a broadcast load, a shift and a mask turn them into 64 bytes of one nibble each (byte e holds
// element e), then per vector one masked VBMI multishift moves 16 of those bytes, 3 bits up, into
// the mantissa of 2.0 (byte 2 of the lane; the window's other bits fall in the zero high halves of
// the nibble's byte and of the byte below, so no further masking is needed). In qword Q, vector j
// takes bytes 2j and 2j + 1 of that qword.
struct Unpacker {
  __m512i control[4];
  __m512i shift;  // per 16-bit word: 0 in the low 256 bits, 4 in the high ones
  __m512i low;    // 0x0F in every byte
  __m512i two;    // 2.0f in every lane
};

STRATA_AVX512_INLINE Unpacker MakeUnpacker() {
  Unpacker u;
  for (int j = 0; j < 4; ++j) {
    // Byte 2 of each dword: the window starts 3 bits below byte k = 2j (even lane) or 2j + 1.
    const long long even = (8 * (2 * j) - 3) & 63, odd = (8 * (2 * j + 1) - 3) & 63;
    u.control[j] = _mm512_set1_epi64((even << 16) | (odd << 48));
  }
  u.shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  u.low = _mm512_set1_epi8(0x0F);
  u.two = _mm512_set1_epi32(0x40000000);
  return u;
}

// Byte e = nibble e of the group at c (low nibbles are elements 0..31, high ones 32..63).
STRATA_AVX512_INLINE __m512i Nibbles(const uint8_t* c, const Unpacker& u) {
  const __m512i bytes =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
  return _mm512_and_si512(_mm512_srlv_epi16(bytes, u.shift), u.low);
}

// Lane L of vector j: x = 2 + n/8 for element Element(16 j + L).
STRATA_AVX512_INLINE __m512 Widen(__m512i nibbles, int j, const Unpacker& u) {
  return _mm512_castsi512_ps(
      _mm512_mask_multishift_epi64_epi8(u.two, 0x4444444444444444ull, u.control[j], nibbles));
}

// out[g][0][t] = scale and out[g][1][t] = minimum of group g for the tile's tokens (0 past n).
STRATA_AVX512 void UnpackParams(const uint16_t* params, __mmask16 valid, int groups, float* out) {
  const __m512i index =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(groups));
  // Even 16-bit words (the scales) to the low 256 bits, odd ones (the minima) to the high.
  const __m512i split = _mm512_set_epi16(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1,
                                         30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int g = 0; g < groups; ++g) {
    // One 32-bit word per token and group: scale in the low half, minimum in the high half.
    const void* base = params + 2 * g;
    const __m512i pairs =
        groups == 1 ? _mm512_maskz_loadu_epi32(valid, base)
                    : _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, index, base, 4);
    const __m512i halves = _mm512_permutexvar_epi16(split, pairs);
    _mm512_storeu_ps(out + 2 * g * kTile, _mm512_cvtph_ps(_mm512_castsi512_si256(halves)));
    _mm512_storeu_ps(out + (2 * g + 1) * kTile,
                     _mm512_cvtph_ps(_mm512_extracti64x4_epi64(halves, 1)));
  }
}

// Keys are dotted with the query in integers (VNNI): per group the query q is stored as
// q ≈ s · Q, |Q| <= kQMax, Q = a · 2^14 + b · 2^7 + c with signed-byte digits a in [-127, 127]
// and b, c in [-64, 63], so q·n = s · Σ Q n is exact up to s/2 per element (2^-22 of the
// group's largest |q|), and Σ Q n over a group of 64 codes n <= 15 stays below 2^31.
constexpr int kQMax = 127 * 16384;

// The 64-byte chunk of key codes at c as two vectors of one nibble per byte: `lo` holds the low
// nibbles (elements 0..31 of the chunk's two 32-byte group rows), `hi` the high ones (32..63).
struct Nibbles64 {
  __m512i lo, hi;
};

STRATA_AVX512_INLINE Nibbles64 SplitNibbles(const uint8_t* c) {
  const __m512i bytes = _mm512_loadu_si512(c), low = _mm512_set1_epi8(0x0F);
  return {_mm512_and_si512(bytes, low), _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low)};
}

// Lanes 0-7 (8-15) of the result sum to Σ Q n over the chunk's first (second) group row; q holds
// the digit vectors {a lo, a hi, b lo, b hi, c lo, c hi} laid out like the chunk.
STRATA_AVX512_INLINE __m512i ChunkDot(const Nibbles64& n, const __m512i* q) {
  __m512i x = _mm512_dpbusd_epi32(_mm512_setzero_si512(), n.lo, q[0]);
  x = _mm512_dpbusd_epi32(x, n.hi, q[1]);
  x = _mm512_dpbusd_epi32(_mm512_slli_epi32(x, 7), n.lo, q[2]);
  x = _mm512_dpbusd_epi32(x, n.hi, q[3]);
  x = _mm512_dpbusd_epi32(_mm512_slli_epi32(x, 7), n.lo, q[4]);
  return _mm512_dpbusd_epi32(x, n.hi, q[5]);
}

// Three levels of a transpose-and-add tree over 8 ChunkDot results v0..v7 (2 rows of 8 lanes
// each): in 128-bit block k and position p of the result sits the row sum of row k % 2 of
// v(4 (k / 2) + p), which SlotLane inverts. Integer adds are exact (and wrap harmlessly).
STRATA_AVX512_INLINE __m512i AddPairs32(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
STRATA_AVX512_INLINE __m512i AddPairs64(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
STRATA_AVX512_INLINE __m512i AddBlocks(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The lane of the tree's result that holds group row s (0..15) of its 8 chunks.
constexpr int SlotLane(int s) { return (s & 8) + (s & 1) * 4 + (s & 7) / 2; }

// The key dot products of one full tile for H heads: the tile's 16 · groups group rows ("slots",
// slot = token · groups + group) come as 8 · groups chunks; every 8 chunks reduce to one vector of
// 16 slots, whose lanes `perm` and `which` route to dots[h][g] (token lanes, int32). qd holds
// heads' digit vectors, `patterns` sets of 6 per head (chunk i uses set i % patterns); with
// kOnePattern (patterns == 1) they are loaded into registers once.
template <int H, bool kOnePattern>
STRATA_AVX512_OUTLINE void TileKeyDots(const uint8_t* codes, int groups, int patterns,
                                       const __m512i* qd, const __m512i* perm, const __m512i* which,
                                       __m512i* dots) {
  const int qstride = 6 * patterns;
  __m512i qr[H][6];
  if constexpr (kOnePattern) {
    for (int h = 0; h < H; ++h) {
      for (int k = 0; k < 6; ++k) qr[h][k] = _mm512_load_si512(qd + h * qstride + k);
    }
  }
  int pattern = 0;
  for (int j = 0; j < groups; ++j) {
    __m512i half[H][2];
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      __m512i pair[H][2];
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        __m512i dot[H][2];
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
          const Nibbles64 n = SplitNibbles(codes + 64 * (8 * j + 4 * u + 2 * v + k));
          for (int h = 0; h < H; ++h) {
            dot[h][k] = ChunkDot(n, kOnePattern ? qr[h] : qd + h * qstride + 6 * pattern);
          }
          if (!kOnePattern && ++pattern == patterns) pattern = 0;
        }
        for (int h = 0; h < H; ++h) pair[h][v] = AddPairs32(dot[h][0], dot[h][1]);
      }
      for (int h = 0; h < H; ++h) half[h][u] = AddPairs64(pair[h][0], pair[h][1]);
    }
    for (int h = 0; h < H; ++h) {
      const __m512i slots = AddBlocks(half[h][0], half[h][1]);
      for (int g = 0; g < groups; ++g) {
        __m512i* out = dots + h * groups + g;
        if (groups == 1) {
          *out = _mm512_permutexvar_epi32(perm[0], slots);
          continue;
        }
        const __mmask16 m = _mm512_cmpeq_epi32_mask(which[g], _mm512_set1_epi32(j));
        *out = _mm512_mask_permutexvar_epi32(*out, m, perm[g], slots);
      }
    }
  }
}

// Calls f(std::integral_constant<int, k>{}) with k = min(n, Max), 1 <= n: runs the template
// instance of a tile function compiled for k heads.
template <int Max, int K = 1, class F>
inline void WithHeads(int n, F&& f) {
  if constexpr (K == Max) {
    f(std::integral_constant<int, K>{});
  } else if (n == K) {
    f(std::integral_constant<int, K>{});
  } else {
    WithHeads<Max, K + 1>(n, f);
  }
}

// TileKeyDots for any head count, up to 4 heads at a time (so that the digits and partial sums
// stay in registers).
STRATA_AVX512 void KeyDots(const uint8_t* codes, int heads, int groups, int patterns,
                           const __m512i* qd, const __m512i* perm, const __m512i* which,
                           __m512i* dots) {
  for (int h = 0; h < heads; h += 4) {
    const __m512i* q = qd + h * 6 * patterns;
    __m512i* o = dots + h * groups;
    const bool one = patterns == 1;
    WithHeads<4>(heads - h, [&](auto k) {
      one ? TileKeyDots<decltype(k)::value, true>(codes, groups, patterns, q, perm, which, o)
          : TileKeyDots<decltype(k)::value, false>(codes, groups, patterns, q, perm, which, o);
    });
  }
}

// a[h][i] += wt[h · wt_stride] · x_i, x_i vector v0 + i (Unpacker order) of the group at row.
template <int H, int V>
STRATA_AVX512_INLINE void AddValueRow(const uint8_t* row, const float* wt, int wt_stride, int v0,
                                      const Unpacker& control, __m512 (&a)[H][V]) {
  const __m512i nibbles = Nibbles(row, control);
  __m512 x[V];
  for (int i = 0; i < V; ++i) x[i] = Widen(nibbles, v0 + i, control);
  for (int h = 0; h < H; ++h) {
    const __m512 weight = _mm512_set1_ps(wt[h * wt_stride]);
    for (int i = 0; i < V; ++i) a[h][i] = _mm512_fmadd_ps(weight, x[i], a[h][i]);
  }
}

// For H query heads and the V vectors v0.. of a group's 4 (Unpacker order): acc_h = corr_h · acc_h
// + the sum over the step's n tokens of wt_h[t] · x_t, x_t the unpacked value codes, each row
// unpacked once for the H heads; corr_h = corr[h · corr_stride]. The step is summed apart and
// then added, so that a long context adds into acc once per step, not once per token (rounding
// error grows with the chain length, and Σ wt · x, about 16 · Σ p · scale, cancels with the
// minimum's term later).
// The loop takes tokens in pairs; one or two heads give the odd tokens their own accumulators to
// keep the FMA chains short (more heads already have enough independent chains).
template <int H, int V>
STRATA_AVX512_OUTLINE void TileValues(const uint8_t* codes, int n, int d, const float* wt,
                                      int wt_stride, const float* corr, int corr_stride,
                                      const Unpacker& control, int v0, float* acc) {
  constexpr bool kSplit = H <= 2;
  __m512 even[H][V], odd[H][V];
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < V; ++i) even[h][i] = odd[h][i] = _mm512_setzero_ps();
  }
  const uint8_t* row = codes;
  const long row_bytes = d / 2;
  int t = 0;
  for (; t + 1 < n; t += 2, row += 2 * row_bytes) {
    AddValueRow<H, V>(row, wt + t, wt_stride, v0, control, even);
    AddValueRow<H, V>(row + row_bytes, wt + t + 1, wt_stride, v0, control, kSplit ? odd : even);
  }
  if (t < n) AddValueRow<H, V>(row, wt + t, wt_stride, v0, control, even);
  for (int h = 0; h < H; ++h) {
    const __m512 c = _mm512_set1_ps(corr[h * corr_stride]);
    for (int i = 0; i < V; ++i) {
      const __m512 sum = kSplit ? _mm512_add_ps(even[h][i], odd[h][i]) : even[h][i];
      float* a = acc + h * d + 16 * (v0 + i);
      _mm512_store_ps(a, _mm512_fmadd_ps(c, _mm512_load_ps(a), sum));
    }
  }
}

// TileValues for H heads over a whole group: up to 4 heads take the 4 vectors at once, 5 to 8
// heads two at a time (so that the accumulators stay in registers).
template <int H>
STRATA_AVX512 void GroupValues(const uint8_t* codes, int n, int d, const float* wt,
                               const float* corr, int corr_stride, const Unpacker& control,
                               float* acc) {
  if constexpr (H <= 4) {
    TileValues<H, 4>(codes, n, d, wt, kStep, corr, corr_stride, control, 0, acc);
  } else {
    TileValues<H, 2>(codes, n, d, wt, kStep, corr, corr_stride, control, 0, acc);
    TileValues<H, 2>(codes, n, d, wt, kStep, corr, corr_stride, control, 2, acc);
  }
}

// Asks for the codes and params of the tile at t. ScoreStep asks for each tile one step ahead:
// with the hardware prefetcher alone the core waits on DRAM (further ahead, or a whole step at
// once, measured no better).
STRATA_AVX512_INLINE void PrefetchTile(const uint8_t* codes, const uint16_t* params, int t, int len,
                                       int d) {
  if (t >= len) return;
  const char* c = reinterpret_cast<const char*>(codes + static_cast<long>(t) * (d / 2));
  for (int i = 0; i < kTile * d / 2; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
  const char* p = reinterpret_cast<const char*>(params + static_cast<long>(t) * (d / 32));
  for (int i = 0; i < kTile * d / 16; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

// Scores may exceed the softmax reference by this much before it is raised: e^16 leaves the
// fp32 sums far from overflow, and the final division by Σ p makes the choice of reference exact.
constexpr float kSlack = 16.0f;

// The state of one work item between steps.
struct Pass {
  int d, groups, heads, patterns;
  const Work* w;
  float* kparams;        // [kStepTiles, groups, 2, kTile]
  float* vparams;        // [kStepTiles, groups, 2, kTile]
  float* weights;        // 2 x [groups, heads, kStep]: 8 · probability · value scale, per parity
  float* corr;           // 2 x [heads rounded up to 16]: the step's rescale factor, per parity
  int corr_stride;       // floats between the two parities of `corr`
  __m512* state;         // per head: Σ probability (lane-wise), softmax reference (lane 0), then
                         // per group Σ probability · (minimum - 16 · value scale), lane-wise
  int slots;             // vectors of `state` per head
  const __m512i* qd;     // [heads, patterns, 6]: the query's digit vectors (TileKeyDots)
  const float* qscale;   // [heads, groups]: s of those digits
  const __m512i* perm;   // [groups]: lane of its slot vector that token t of group g sits in
  const __m512i* which;  // [groups]: which slot vector that is
  __m512i* dots;         // [kStepTiles, heads, groups]: the step's Σ Q n, token lanes
  uint8_t* tail;         // a partial last tile's key codes, zero-padded to a full tile
  float* acc;            // [heads, head_dim], in the order values unpack
  Unpacker control;
};

// Writes head h's query digits and scales (TileKeyDots) for the `patterns` chunk layouts.
STRATA_AVX512 void QueryDigits(const Pass& s, int h, __m512i* qd, float* qscale) {
  const float* q = s.w->q + static_cast<long>(h) * s.d;
  for (int g = 0; g < s.groups; ++g) {
    float m = 0.0f;
    for (int i = 0; i < 64; ++i) m = std::max(m, std::fabs(q[64 * g + i]));
    qscale[g] = m / static_cast<float>(kQMax);
  }
  for (int p = 0; p < s.patterns; ++p) {
    int8_t digits[6][64];
    for (int row = 0; row < 2; ++row) {  // the chunk's two 32-byte group rows
      const int g = (2 * p + row) % s.groups;
      const float inv = qscale[g] > 0.0f ? 1.0f / qscale[g] : 0.0f;
      for (int hi = 0; hi < 2; ++hi) {
        for (int i = 0; i < 32; ++i) {
          const float x = q[64 * g + 32 * hi + i] * inv;
          const int big = static_cast<int>(
              std::clamp(std::nearbyint(x), -static_cast<float>(kQMax), static_cast<float>(kQMax)));
          const int c = ((big + 64) & 127) - 64, rest = (big - c) >> 7;
          const int b = ((rest + 64) & 127) - 64, a = (rest - b) >> 7;
          digits[hi][32 * row + i] = static_cast<int8_t>(a);
          digits[2 + hi][32 * row + i] = static_cast<int8_t>(b);
          digits[4 + hi][32 * row + i] = static_cast<int8_t>(c);
        }
      }
    }
    for (int k = 0; k < 6; ++k) qd[6 * p + k] = _mm512_loadu_si512(digits[k]);
  }
}

// Scores of the step at t0 (kStepTiles tiles) from the key codes, then the online-softmax update:
// the weights and rescale factors for the step's values go to parity `b` of the buffers. The
// reference the probabilities are taken against only moves up when a score passes it by kSlack.
// kHeads and kGroups, when positive, are s.heads and s.groups known at compile time, so that the
// loops over them unroll; 0 reads them from s.
template <int kHeads, int kGroups>
STRATA_AVX512 void ScoreStep(const Pass& s, int t0, int b) {
  const Work& w = *s.w;
  const int d = s.d;
  const int groups = kGroups > 0 ? kGroups : s.groups, heads = kHeads > 0 ? kHeads : s.heads;
  const __m512 eight = _mm512_set1_ps(8.0f), sixteen = _mm512_set1_ps(16.0f);
  __mmask16 valid[kStepTiles];
  for (int u = 0; u < kStepTiles; ++u) {  // tile u: tokens t0 + 16 u ..
    const int t = t0 + u * kTile, n = std::clamp(w.len - t, 0, kTile);
    PrefetchTile(w.k_codes, w.k_params, t + kStep, w.len, d);
    PrefetchTile(w.v_codes, w.v_params, t + kStep, w.len, d);
    valid[u] = static_cast<__mmask16>((1u << n) - 1);
    if (n == 0) continue;
    UnpackParams(w.k_params + static_cast<long>(t) * 2 * groups, valid[u], groups,
                 s.kparams + u * 2 * groups * kTile);
    UnpackParams(w.v_params + static_cast<long>(t) * 2 * groups, valid[u], groups,
                 s.vparams + u * 2 * groups * kTile);
    const uint8_t* codes = w.k_codes + static_cast<long>(t) * (d / 2);
    if (n < kTile) {
      std::memset(s.tail, 0, static_cast<size_t>(kTile) * d / 2);
      std::memcpy(s.tail, codes, static_cast<size_t>(n) * d / 2);
      codes = s.tail;
    }
    KeyDots(codes, heads, groups, s.patterns, s.qd, s.perm, s.which, s.dots + u * heads * groups);
  }
  float* wt = s.weights + b * groups * heads * kStep;
  const __m512 none = _mm512_set1_ps(-INFINITY);
  for (int h = 0; h < heads; ++h) {
    __m512 score[kStepTiles];
    for (int u = 0; u < kStepTiles; ++u) {
      const float* kp = s.kparams + u * 2 * groups * kTile;
      const __m512i* dots = s.dots + (u * heads + h) * groups;
      score[u] = _mm512_setzero_ps();
      for (int g = 0; g < groups; ++g) {
        const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(kp + 2 * g * kTile),
                                           _mm512_set1_ps(s.qscale[h * groups + g]));
        score[u] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dots[g]), score[u]);
        score[u] = _mm512_fmadd_ps(_mm512_loadu_ps(kp + (2 * g + 1) * kTile),
                                   _mm512_set1_ps(w.qsum[h * groups + g]), score[u]);
      }
    }
    __m512* st = s.state + h * s.slots;
    float& ref = *reinterpret_cast<float*>(st + 1);
    float& corr = s.corr[b * s.corr_stride + h];
    corr = 1.0f;
    const __m512 limit = _mm512_set1_ps(ref + kSlack);
    __mmask16 above = 0;
    for (int u = 0; u < kStepTiles; ++u) {
      above |= _mm512_mask_cmp_ps_mask(valid[u], score[u], limit, _CMP_GT_OQ);
    }
    if (above) {  // rescale what was accumulated under the old reference (nothing at first)
      __m512 top = none;
      for (int u = 0; u < kStepTiles; ++u) {
        top = _mm512_max_ps(top, _mm512_mask_mov_ps(none, valid[u], score[u]));
      }
      const float step_max = _mm512_reduce_max_ps(top);
      corr = std::exp(ref - step_max);
      ref = step_max;
      st[0] = _mm512_mul_ps(st[0], _mm512_set1_ps(corr));
      for (int g = 0; g < groups; ++g) st[2 + g] = _mm512_mul_ps(st[2 + g], _mm512_set1_ps(corr));
    }
    const __m512 r = _mm512_set1_ps(ref);
    __m512 p[kStepTiles];
    for (int u = 0; u < kStepTiles; ++u) {
      p[u] = _mm512_maskz_mov_ps(valid[u], Exp(_mm512_sub_ps(score[u], r)));
      st[0] = _mm512_add_ps(st[0], p[u]);
    }
    for (int g = 0; g < groups; ++g) {
      float* wg = wt + (g * heads + h) * kStep;
      for (int u = 0; u < kStepTiles; ++u) {
        const float* vp = s.vparams + (u * groups + g) * 2 * kTile;
        const __m512 scale = _mm512_loadu_ps(vp);
        _mm512_store_ps(wg + u * kTile, _mm512_mul_ps(p[u], _mm512_mul_ps(eight, scale)));
        const __m512 offset = _mm512_fnmadd_ps(sixteen, scale, _mm512_loadu_ps(vp + kTile));
        st[2 + g] = _mm512_fmadd_ps(p[u], offset, st[2 + g]);
      }
    }
  }
}

// Adds the value codes of the step at t0, weighted by parity `b` of the buffers, to the outputs.
STRATA_AVX512 void ValueStep(const Pass& s, int t0, int b) {
  const int d = s.d, heads = s.heads, n = std::min(kStep, s.w->len - t0);
  const uint8_t* codes = s.w->v_codes + static_cast<long>(t0) * (d / 2);
  const float* wt = s.weights + b * s.groups * heads * kStep;
  for (int g = 0; g < s.groups; ++g) {
    for (int h = 0; h < heads; h += 8) {
      const uint8_t* c = codes + 32 * g;
      const float* wg = wt + (g * heads + h) * kStep;
      const float* corr = s.corr + b * s.corr_stride + h;
      float* a = s.acc + h * d + 64 * g;
      WithHeads<8>(heads - h, [&](auto k) {
        GroupValues<decltype(k)::value>(c, n, d, wg, corr, 1, s.control, a);
      });
    }
  }
}

}  // namespace

// The steps of a work item, ScoreStep<kHeads, kGroups> one step ahead of ValueStep.
template <int kHeads, int kGroups>
STRATA_AVX512 void Pipeline(const Pass& s) {
  const int len = s.w->len;
  ScoreStep<kHeads, kGroups>(s, 0, 0);
  for (int t0 = 0; t0 < len; t0 += kStep) {
    const int b = (t0 / kStep) & 1;
    if (t0 + kStep < len) ScoreStep<kHeads, kGroups>(s, t0 + kStep, b ^ 1);
    ValueStep(s, t0, b);
  }
}

// Software-pipelined over steps: the scores and softmax of step i + 1 are computed before the
// values of step i, so that the latency of the softmax chain (reductions, exp) overlaps with
// independent work instead of stalling the value loop that depends on it.
STRATA_AVX512 void AttendAvx512(const Work& w) {
  const int d = w.head_dim, groups = d / 64, heads = w.heads;
  for (int t = 0; t < kStep; t += kTile) {  // the first step arrives during the setup below
    PrefetchTile(w.k_codes, w.k_params, t, w.len, d);
    PrefetchTile(w.v_codes, w.v_params, t, w.len, d);
  }
  const Layout l = ScratchLayout(heads, d, w.len);
  Pass s;
  s.d = d;
  s.groups = groups;
  s.heads = heads;
  s.w = &w;
  s.patterns = groups % 2 == 1 ? groups : groups / 2;
  s.kparams = w.scratch + l.kparams;
  s.vparams = w.scratch + l.vparams;
  s.weights = w.scratch + l.weights;
  s.corr = w.scratch + l.corr;
  s.corr_stride = (heads + 15) / 16 * 16;
  s.state = reinterpret_cast<__m512*>(w.scratch + l.sums);
  s.slots = 2 + groups;
  auto* qd = reinterpret_cast<__m512i*>(w.scratch + l.qdigits);
  float* qscale = w.scratch + l.qscale;
  auto* perm = reinterpret_cast<__m512i*>(w.scratch + l.tperm);
  s.qd = qd;
  s.qscale = qscale;
  s.perm = perm;
  s.which = perm + groups;
  s.dots = reinterpret_cast<__m512i*>(w.scratch + l.dots);
  s.tail = reinterpret_cast<uint8_t*>(w.scratch + l.tail);
  s.acc = w.scratch + l.acc;
  s.control = MakeUnpacker();

  for (int g = 0; g < groups; ++g) {  // token t of group g is slot t · groups + g of the tile
    alignas(64) int lane[kTile], vec[kTile];
    for (int t = 0; t < kTile; ++t) {
      lane[t] = SlotLane((t * groups + g) % 16);
      vec[t] = (t * groups + g) / 16;
    }
    perm[g] = _mm512_load_si512(lane);
    perm[groups + g] = _mm512_load_si512(vec);
  }
  for (int h = 0; h < heads; ++h) {
    QueryDigits(s, h, qd + h * 6 * s.patterns, qscale + h * groups);
    __m512* st = s.state + h * s.slots;
    st[0] = _mm512_setzero_ps();
    st[1] = _mm512_set1_ps(-INFINITY);
    for (int g = 0; g < groups; ++g) st[2 + g] = _mm512_setzero_ps();
  }
  std::memset(s.acc, 0, sizeof(float) * heads * d);
  // Compiled for the common shapes: 1, 4 or 8 query heads per KV head, head_dim 64 or 128.
  const auto with_groups = [&](auto h) {
    if (groups == 1) {
      Pipeline<decltype(h)::value, 1>(s);
    } else if (groups == 2) {
      Pipeline<decltype(h)::value, 2>(s);
    } else {
      Pipeline<0, 0>(s);
    }
  };
  if (heads == 1) {
    with_groups(std::integral_constant<int, 1>{});
  } else if (heads == 4) {
    with_groups(std::integral_constant<int, 4>{});
  } else if (heads == 8) {
    with_groups(std::integral_constant<int, 8>{});
  } else {
    Pipeline<0, 0>(s);
  }
  for (int h = 0; h < heads; ++h) {
    const __m512* st = s.state + h * s.slots;
    const float sum = _mm512_reduce_add_ps(st[0]), inv = 1.0f / sum;
    if (w.lse != nullptr) w.lse[h] = *reinterpret_cast<const float*>(st + 1) + std::log(sum);
    for (int g = 0; g < groups; ++g) {
      const float m = _mm512_reduce_add_ps(st[2 + g]);
      const float* a = s.acc + h * d + 64 * g;
      float* o = w.out + h * d + 64 * g;
      for (int i = 0; i < 64; ++i) o[Element(i)] = (a[i] + m) * inv;
    }
  }
}

}  // namespace strata::kernels::cpu::q4
