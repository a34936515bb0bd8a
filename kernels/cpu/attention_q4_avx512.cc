// The AVX-512 path of DecodeAttentionQ4 (see attention_q4.h). Compiled for AVX-512 (F, BW, DQ,
// VL, VBMI, VNNI) by function attributes only, so the library still runs on CPUs without it;
// attention_q4.cc dispatches here after checking the CPU at run time.
//
// One pass over the work item, 64 tokens (a step of four 16-token tiles) at a time, with an online
// softmax: the step's key codes give its scores, the scores update the softmax state, and the
// step's value codes are weighted by the probabilities, so scores never leave L1. Keys are dotted
// with the query in exact integer arithmetic (VNNI, the query split into byte digits, see
// kQMax), and value codes are weighted the same way (the step's weights p · scale split into
// digits, see kWMax): per group p·v' = scale·(p·n) + minimum·p, the codes never widened to floats.
// Keys by channel (Work::key_phase) take the same loop: when a tile starts a new key group, the
// query times the group's channel scales is split into digits, and q·minimums is the tiles' score
// offset (ChannelQuery). A work item that starts mid-tile of a key group starts at the tile's
// first token instead and leaves the tokens before its own out (Work::skip).
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/attention_q4_paths.h"
#include "kernels/kv_q4_format.h"

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

// Converts a vector of fp16 words, scales in the low 256 bits and minima in the high, to
// out[0][t] and out[1][t].
STRATA_AVX512_INLINE void StoreParams(__m512i halves, float* out) {
  _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm512_castsi512_si256(halves)));
  _mm512_storeu_ps(out + kTile, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(halves, 1)));
}

// Word permutations for params (UnpackParams): `one` takes one group's 32-bit words (scale low,
// minimum high) of 16 tokens to their 16 scales, then their 16 minima; `two[g]` does the same for
// group g of 16 tokens' two groups, spread over two vectors.
struct ParamOrder {
  alignas(64) uint16_t one[32];
  alignas(64) uint16_t two[2][32];
};

constexpr ParamOrder MakeParamOrder() {
  ParamOrder o{};
  for (int t = 0; t < 16; ++t) {
    o.one[t] = static_cast<uint16_t>(2 * t);
    o.one[16 + t] = static_cast<uint16_t>(2 * t + 1);
    for (int g = 0; g < 2; ++g) {
      o.two[g][t] = static_cast<uint16_t>(4 * t + 2 * g);
      o.two[g][16 + t] = static_cast<uint16_t>(4 * t + 2 * g + 1);
    }
  }
  return o;
}

constexpr ParamOrder kParamOrder = MakeParamOrder();

// The first k bits.
inline __mmask16 FirstBits(unsigned k) {
  return static_cast<__mmask16>(k >= 16 ? 0xFFFFu : (1u << k) - 1);
}

// out[g][0][t] = scale and out[g][1][t] = minimum of group g for the tile's first n tokens (0
// past them). Per token the params are `groups` 32-bit words, scale in the low half, minimum in
// the high half: one or two groups are loaded whole and sorted by a word permutation, more are
// gathered a group at a time.
STRATA_AVX512_INLINE void UnpackParams(const uint16_t* params, int n, int groups, float* out) {
  const __m512i one = _mm512_load_si512(kParamOrder.one);
  if (groups == 1) {
    const __m512i pairs = _mm512_maskz_loadu_epi32(FirstBits(n), params);
    StoreParams(_mm512_permutexvar_epi16(one, pairs), out);
    return;
  }
  if (groups == 2) {
    const unsigned words = 2u * static_cast<unsigned>(n);
    const __m512i first = _mm512_maskz_loadu_epi32(FirstBits(words), params);
    const __m512i second =
        _mm512_maskz_loadu_epi32(FirstBits(words > 16 ? words - 16 : 0), params + 32);
    for (int g = 0; g < 2; ++g) {
      const __m512i order = _mm512_load_si512(kParamOrder.two[g]);
      StoreParams(_mm512_permutex2var_epi16(first, order, second), out + 2 * g * kTile);
    }
    return;
  }
  const __m512i index =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(groups));
  for (int g = 0; g < groups; ++g) {
    const __m512i pairs =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), FirstBits(n), index, params + 2 * g, 4);
    StoreParams(_mm512_permutexvar_epi16(one, pairs), out + 2 * g * kTile);
  }
}

// Keys are dotted with the query in integers (VNNI): per group the query q is stored as
// q ≈ s · Q, |Q| <= kQMax, Q = a · 2^16 + b · 2^8 + c with a signed-byte digit a and unsigned-byte
// digits b and c: the three low bytes of Q's int32, taken as they are (no carries to fix up), so
// q·n = s · Σ Q n is exact up to s/2 per element (2^-22 of the group's largest |q|), and Σ Q n
// over a group of 64 codes n <= 15 stays below 2^31. vpdpbusd multiplies unsigned by signed
// bytes: a is the signed operand against the codes, and for b and c the codes (< 16) are.
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
// the digit vectors {a lo, a hi, b lo, b hi, c lo, c hi} laid out like the chunk. The int32 adds
// and shifts wrap, and the total they build is exact (kQMax).
STRATA_AVX512_INLINE __m512i ChunkDot(const Nibbles64& n, const __m512i* q) {
  __m512i x = _mm512_dpbusd_epi32(_mm512_setzero_si512(), n.lo, q[0]);
  x = _mm512_dpbusd_epi32(x, n.hi, q[1]);
  x = _mm512_dpbusd_epi32(_mm512_slli_epi32(x, 8), q[2], n.lo);
  x = _mm512_dpbusd_epi32(x, q[3], n.hi);
  x = _mm512_dpbusd_epi32(_mm512_slli_epi32(x, 8), q[4], n.lo);
  return _mm512_dpbusd_epi32(x, q[5], n.hi);
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

// Values are weighted in integers (VNNI) as well. Per step, group and head, ScoreStep stores the
// weights w_t = p_t · scale_t (p the probability, scale the token's value scale) as w ≈ s · W,
// 0 <= W <= kWMax, by the three bytes of W (digits 0..255, unsigned operands of vpdpbusd, the
// codes being the signed ones), one byte per token and digit, so that four consecutive tokens'
// digits make one int32 that vpdpbusd broadcasts. Each W is rounded by at most s/2 = 2^-25 of the
// step's largest weight; per digit Σ digit · n over a step's 64 tokens stays below 64 · 15 · 255
// (int32 sums are exact), and the three sums are joined in fp32 (W · n = Σ_k 256^k · digit_k · n).
constexpr int kWMax = (1 << 24) - 1;

// One (step, group, head) block of `Pass::weights`: per tile of the step, 16 bytes of each digit
// (digit k of the tile's token i at byte 16 k + i), then s.
struct StepWeights {
  alignas(64) uint8_t digit[kStepTiles][64];
  float s;
};
static_assert(sizeof(StepWeights) == (kStep + 16) * sizeof(float), "ScratchLayout's `weights`");

// acc + vpdpbusd(u8, s8), in inline assembly: with the intrinsic GCC 12 copies each loop-carried
// accumulator to a scratch register and back around every instruction.
STRATA_AVX512_INLINE __m512i DotAdd(__m512i acc, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
}

// Four tokens' value codes of one group (rows r0..r3, 32 bytes each) as four vectors of int32
// lanes that hold the four tokens' codes of one element, a byte per token: vector j lane i holds
// element 16 j + i, so the vectors are the group's 64 elements in their natural order.
struct Quad {
  __m512i v[4];
};

STRATA_AVX512_INLINE __m512i LoadRows(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// Byte i of a row holds element i in its low nibble and element 32 + i in its high one; `index`
// gathers byte i of the four rows into lane i (index[0]) and lane i - 16 (index[1]).
STRATA_AVX512_INLINE Quad QuadCodes(const uint8_t* rows, long row_bytes, const __m512i* index) {
  const __m512i first = LoadRows(rows, rows + row_bytes);
  const __m512i second = LoadRows(rows + 2 * row_bytes, rows + 3 * row_bytes);
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i x0 = _mm512_permutex2var_epi8(first, index[0], second);
  const __m512i x1 = _mm512_permutex2var_epi8(first, index[1], second);
  return {{_mm512_and_si512(x0, low), _mm512_and_si512(x1, low),
           _mm512_and_si512(_mm512_srli_epi16(x0, 4), low),
           _mm512_and_si512(_mm512_srli_epi16(x1, 4), low)}};
}

// A partial last quad: `count` < 4 rows (row_bytes apart from `rows`), zero-padded in `tail`.
STRATA_AVX512 Quad TailQuad(const uint8_t* rows, int count, long row_bytes, const __m512i* index,
                            uint8_t* tail) {
  std::memset(tail, 0, 4 * 32);
  for (int r = 0; r < count; ++r) std::memcpy(tail + 32 * r, rows + r * row_bytes, 32);
  return QuadCodes(tail, 32, index);
}

// The int32 of digit k of the step's tokens t..t + 3, broadcast.
STRATA_AVX512_INLINE __m512i Digits(const StepWeights& w, int k, int t) {
  int32_t four;
  std::memcpy(&four, w.digit[t / kTile] + 16 * k + t % kTile, 4);
  return _mm512_set1_epi32(four);
}

// acc = corr · acc + s · Σ_k 256^k · sum[k], over one group's 4 vectors.
STRATA_AVX512_INLINE void AddWeighted(const __m512i (&sum)[3][4], float corr, float s, float* acc) {
  const __m512 c = _mm512_set1_ps(corr), scale = _mm512_set1_ps(s), base = _mm512_set1_ps(256.0f);
  for (int i = 0; i < 4; ++i) {
    __m512 total = _mm512_cvtepi32_ps(sum[2][i]);
    total = _mm512_fmadd_ps(total, base, _mm512_cvtepi32_ps(sum[1][i]));
    total = _mm512_fmadd_ps(total, base, _mm512_cvtepi32_ps(sum[0][i]));
    float* a = acc + 16 * i;
    _mm512_store_ps(a, _mm512_fmadd_ps(c, _mm512_load_ps(a), _mm512_mul_ps(scale, total)));
  }
}

// sum[k] += the products of quad x (tokens t..t + 3) with digit k of their weights.
STRATA_AVX512_INLINE void AddQuad(const Quad& x, const StepWeights& w, int t,
                                  __m512i (&sum)[3][4]) {
  for (int k = 0; k < 3; ++k) {
    const __m512i digits = Digits(w, k, t);
    for (int i = 0; i < 4; ++i) sum[k][i] = DotAdd(sum[k][i], digits, x.v[i]);
  }
}

// One query head's values of one group over the step's n tokens, straight from the codes (rows
// row_bytes apart): acc = corr · acc + Σ w · n, the three digits at once (12 independent
// accumulators; fewer would wait on vpdpbusd's latency).
STRATA_AVX512_OUTLINE void OneHeadValues(const uint8_t* codes, int n, long row_bytes,
                                         const __m512i* index, uint8_t* tail, const StepWeights& w,
                                         float corr, float* acc) {
  __m512i sum[3][4];
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 4; ++i) sum[k][i] = _mm512_setzero_si512();
  }
  int t = 0;
  for (; t + 4 <= n; t += 4) AddQuad(QuadCodes(codes + t * row_bytes, row_bytes, index), w, t, sum);
  if (t < n) AddQuad(TailQuad(codes + t * row_bytes, n - t, row_bytes, index, tail), w, t, sum);
  AddWeighted(sum, corr, w.s, acc);
}

// The step's value codes of one group as Quads, for several heads to share.
STRATA_AVX512 void StepQuads(const uint8_t* codes, int n, long row_bytes, const __m512i* index,
                             uint8_t* tail, Quad* quads) {
  int t = 0;
  for (; t + 4 <= n; t += 4) quads[t / 4] = QuadCodes(codes + t * row_bytes, row_bytes, index);
  if (t < n) quads[t / 4] = TailQuad(codes + t * row_bytes, n - t, row_bytes, index, tail);
}

// OneHeadValues for H query heads (weights w[0..H), rescale factors corr[0..H), outputs
// acc + h · d) over the step's `count` quads: the three digits one after another, so that the
// 12 · H accumulators stay 4 · H.
template <int H>
STRATA_AVX512_OUTLINE void StepValues(const Quad* quads, int count, const StepWeights* w,
                                      const float* corr, int d, float* acc) {
  __m512i sum[H][3][4];
  for (int k = 0; k < 3; ++k) {
    __m512i part[H][4];
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < 4; ++i) part[h][i] = _mm512_setzero_si512();
    }
    for (int q = 0; q < count; ++q) {
      for (int h = 0; h < H; ++h) {
        const __m512i digits = Digits(w[h], k, 4 * q);
        for (int i = 0; i < 4; ++i) part[h][i] = DotAdd(part[h][i], digits, quads[q].v[i]);
      }
    }
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < 4; ++i) sum[h][k][i] = part[h][i];
    }
  }
  for (int h = 0; h < H; ++h) AddWeighted(sum[h], corr[h], w[h].s, acc + h * d);
}

// Asks for the codes and params (`halves` fp16 values per token) of the tile at t. ScoreStep asks
// for each tile one step ahead: with the hardware prefetcher alone the core waits on DRAM (further
// ahead, or a whole step at once, measured no better).
STRATA_AVX512_INLINE void PrefetchTile(const uint8_t* codes, const uint16_t* params, int halves,
                                       int t, int len, int d) {
  if (t >= len) return;
  const char* c = reinterpret_cast<const char*>(codes + static_cast<long>(t) * (d / 2));
#pragma GCC unroll 16
  for (int i = 0; i < kTile * d / 2; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
  const char* p = reinterpret_cast<const char*>(params + static_cast<long>(t) * halves);
  for (int i = 0; i < kTile * halves * 2; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

// Scores may exceed the softmax reference by this much before it is raised: e^16 leaves the
// fp32 sums far from overflow, and the final division by Σ p makes the choice of reference exact.
constexpr float kSlack = 16.0f;

// The state of one work item between steps.
struct Pass {
  int d, groups, heads, patterns;
  int key_halves;  // fp16 values of key params per token (keys by channel: per slot)
  const Work* w;
  float* kparams;        // [kStepTiles, groups, 2, kTile]
  float* vparams;        // [kStepTiles, groups, 2, kTile]
  StepWeights* weights;  // 2 x [groups, heads]: the step's value weights, per parity
  float* corr;           // 2 x [heads rounded up to 16]: the step's rescale factor, per parity
  int corr_stride;       // floats between the two parities of `corr`
  __m512* state;         // per head: Σ probability (lane-wise), softmax reference (lane 0), then
                         // per group Σ probability · value minimum, lane-wise
  int slots;             // vectors of `state` per head
  __m512i* qd;           // [heads, patterns, 6]: the query's digit vectors (TileKeyDots)
  float* qscale;         // [heads, groups]: s of those digits
  // Keys by channel (w->key_phase >= 0): qd and qscale are those of q times the channel scales of
  // key group *key_group (ChannelQuery), bias is q·minimums of that group per head, chq the
  // group's channel scales then minimums [2, head_dim]; tscale [kStepTiles, heads, groups] and
  // tbias [kStepTiles, heads] hold the qscale and bias of each tile of the step being scored.
  // chmax, chdot and chinv are ChannelQuery's workspace (Layout::chred).
  int* key_group;
  float* chq;
  float* bias;
  __m512* chmax;
  __m512* chdot;
  float* chinv;
  float* tscale;
  float* tbias;
  const __m512i* perm;   // [groups]: lane of its slot vector that token t of group g sits in
  const __m512i* which;  // [groups]: which slot vector that is
  __m512i* dots;         // [kStepTiles, heads, groups]: the step's Σ Q n, token lanes
  uint8_t* tail;         // a partial last tile's key codes, zero-padded to a full tile
  Quad* quads;           // [kStep / 4]: one group's value codes of the step (StepQuads)
  uint8_t* vtail;        // a partial last quad's value codes, zero-padded
  __m512i vindex[2];     // QuadCodes' byte gather
  __m512i wbytes;        // the byte gather that splits a tile's W into StepWeights' digits
  float* acc;            // [heads, head_dim]: output accumulators
};

// The digits a, b, c of 16 query elements x (Q = round(x) clamped to ±kQMax; a, b and c are
// bytes 2, 1 and 0 of Q), as bytes in the low 16 of each result. Clamping before cvtps rounds (to
// nearest even) gives the same Q as clamping after: the bounds are whole numbers.
struct Digits16 {
  __m128i a, b, c;
};
STRATA_AVX512_INLINE Digits16 SplitDigits(__m512 x) {
  const __m512 most = _mm512_set1_ps(static_cast<float>(kQMax));
  const __m512i big = _mm512_cvtps_epi32(
      _mm512_min_ps(_mm512_max_ps(x, _mm512_sub_ps(_mm512_setzero_ps(), most)), most));
  return {_mm512_cvtepi32_epi8(_mm512_srai_epi32(big, 16)),
          _mm512_cvtepi32_epi8(_mm512_srli_epi32(big, 8)), _mm512_cvtepi32_epi8(big)};
}

// 1 / x broadcast, 0 for x = 0 (a group of zeros).
STRATA_AVX512_INLINE __m512 Inverse(float x) { return _mm512_set1_ps(x > 0.0f ? 1.0f / x : 0.0f); }

// Writes the digits and scales (TileKeyDots) of one head's query q for the `patterns` chunk
// layouts.
STRATA_AVX512 void QueryDigits(const Pass& s, const float* q, __m512i* qd, float* qscale) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int g = 0; g < s.groups; ++g) {
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 64; i += 16) {
      m = _mm512_max_ps(m, _mm512_andnot_ps(sign, _mm512_loadu_ps(q + 64 * g + i)));
    }
    qscale[g] = _mm512_reduce_max_ps(m) / static_cast<float>(kQMax);
  }
  for (int p = 0; p < s.patterns; ++p) {
    alignas(64) int8_t digits[6][64];
    for (int row = 0; row < 2; ++row) {  // the chunk's two 32-byte group rows
      if (row == 1 && s.groups == 1) {  // both rows are group 0's
        for (int k = 0; k < 6; ++k) std::memcpy(&digits[k][32], &digits[k][0], 32);
        break;
      }
      const int g = (2 * p + row) % s.groups;
      const __m512 inv = Inverse(qscale[g]);
      for (int hi = 0; hi < 2; ++hi) {
        for (int i = 0; i < 32; i += 16) {
          const Digits16 x =
              SplitDigits(_mm512_mul_ps(_mm512_loadu_ps(q + 64 * g + 32 * hi + i), inv));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(&digits[hi][32 * row + i]), x.a);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(&digits[2 + hi][32 * row + i]), x.b);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(&digits[4 + hi][32 * row + i]), x.c);
        }
      }
    }
    for (int k = 0; k < 6; ++k) qd[6 * p + k] = _mm512_load_si512(digits[k]);
  }
}

// Byte gathers of RowDigits: in index[k], byte j (and 32 + j) of the result is byte k of int32
// lane j of x (j < 16) or of lane j - 16 of y.
struct PackOrder {
  alignas(64) uint8_t index[3][64];
};

constexpr PackOrder MakePackOrder() {
  PackOrder o{};
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 64; ++j) {
      const int i = j % 32;
      o.index[k][j] = static_cast<uint8_t>((i < 16 ? 4 * i : 64 + 4 * (i - 16)) + k);
    }
  }
  return o;
}

constexpr PackOrder kPackOrder = MakePackOrder();

// Keys by channel: one group row's digit vectors {a lo, a hi, b lo, b hi, c lo, c hi}
// (QueryDigits' layout, the row's 32 bytes in both halves) of its 64 elements x · inv, built in
// registers: Q = round(x · inv) (cvtps, to nearest even), whose bytes 2, 1 and 0 one VBMI
// permutation (order[k] = kPackOrder.index[k]) gathers 32 lanes at a time. No clamp: |x| is at
// most kQMax · qscale, so |Q| stays within kQMax + 1 while qscale is a normal float, far inside
// the ±2^23 whose bytes are the digits; a subnormal qscale may give wrong digits, but scores of
// qscale · Σ Q n below 2^-95.
STRATA_AVX512_INLINE void RowDigits(const __m512 (&x)[4], __m512 inv, const __m512i (&order)[3],
                                    __m512i* out) {
  for (int hi = 0; hi < 2; ++hi) {
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x[2 * hi], inv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x[2 * hi + 1], inv));
    for (int k = 0; k < 3; ++k) out[2 * k + hi] = _mm512_permutex2var_epi8(q0, order[2 - k], q1);
  }
}

// Lane i of the result is the maximum (kMax) or the sum of the 16 lanes of v[i], for i < n <= 16,
// and 0 past n: one transpose-and-reduce tree for up to 16 vectors (the lanes' order as in
// TileKeyDots' tree), about 3 instructions a vector where a reduction of its own takes 8.
template <bool kMax>
STRATA_AVX512_INLINE __m512 Fold(__m512 a, __m512 b) {
  if constexpr (kMax) return _mm512_max_ps(a, b);
  return _mm512_add_ps(a, b);
}
template <bool kMax>
STRATA_AVX512_INLINE __m512 Across(const __m512* v, int n) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 u[8], w[4], x[2];
  for (int i = 0; i < 8; ++i) {  // per 128-bit block: v[2i], v[2i + 1], v[2i], v[2i + 1]
    const __m512 a = 2 * i < n ? v[2 * i] : zero, b = 2 * i + 1 < n ? v[2 * i + 1] : zero;
    u[i] = 2 * i < n ? Fold<kMax>(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)) : zero;
  }
  for (int j = 0; j < 4; ++j) {  // per block: v[4j] .. v[4j + 3]
    const __m512d a = _mm512_castps_pd(u[2 * j]), b = _mm512_castps_pd(u[2 * j + 1]);
    w[j] = 4 * j < n ? Fold<kMax>(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                                  _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)))
                     : zero;
  }
  for (int k = 0; k < 2; ++k) {  // blocks: halves of w[2k], then of w[2k + 1]
    x[k] = 8 * k < n
               ? Fold<kMax>(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)))
               : zero;
  }
  return Fold<kMax>(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Keys by channel: the query of one key group from its params (scale of channel c at 2c, minimum
// at 2c + 1): the digits and scales of q' = q times the channel scales to s.qd and s.qscale, and
// q·minimums to s.bias, for every head; then q'·n + bias is each of the group's scores. The params
// are widened once for all heads (into s.chq). A first pass over the heads leaves per head and
// group a vector of |q'| maxima and per head one of q·minimums; these are reduced 16 heads at a
// time (Across), and the digit scales and their inverses computed 16 at a time, instead of two
// horizontal reductions and two divisions per head; a second pass builds the digits (RowDigits).
STRATA_AVX512 void ChannelQuery(const Pass& s, const uint16_t* params) {
  const int d = s.d, groups = s.groups, heads = s.heads, units = heads * groups;
  float* scale = s.chq;
  float* minimum = s.chq + d;
  const __m512i one = _mm512_load_si512(kParamOrder.one);  // 16 channels' scales, then minima
  for (int c = 0; c < d; c += 16) {
    const __m512i halves = _mm512_permutexvar_epi16(one, _mm512_loadu_si512(params + 2 * c));
    _mm512_storeu_ps(scale + c, _mm512_cvtph_ps(_mm512_castsi512_si256(halves)));
    _mm512_storeu_ps(minimum + c, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(halves, 1)));
  }
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int h = 0; h < heads; ++h) {
    const float* q = s.w->q + static_cast<long>(h) * d;
    __m512 dot = _mm512_setzero_ps();
    for (int g = 0; g < groups; ++g) {
      __m512 m = _mm512_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        const int c = 64 * g + 16 * i;
        const __m512 qc = _mm512_loadu_ps(q + c);
        m = _mm512_max_ps(m, _mm512_andnot_ps(sign, _mm512_mul_ps(qc, _mm512_loadu_ps(scale + c))));
        dot = _mm512_fmadd_ps(qc, _mm512_loadu_ps(minimum + c), dot);
      }
      s.chmax[h * groups + g] = m;
    }
    s.chdot[h] = dot;
  }
  // qscale, chinv and bias hold whole vectors (Layout: rounded up to 16).
  for (int i = 0; i < units; i += 16) {
    const __m512 qscale = _mm512_div_ps(Across<true>(s.chmax + i, std::min(16, units - i)),
                                        _mm512_set1_ps(static_cast<float>(kQMax)));
    _mm512_storeu_ps(s.qscale + i, qscale);
    // 1 / qscale, 0 for a group of zeros, at most FLT_MAX (RowDigits).
    const __mmask16 some = _mm512_cmp_ps_mask(qscale, _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm512_storeu_ps(s.chinv + i,
                     _mm512_maskz_min_ps(some, _mm512_div_ps(_mm512_set1_ps(1.0f), qscale),
                                         _mm512_set1_ps(FLT_MAX)));
  }
  for (int h = 0; h < heads; h += 16) {
    _mm512_storeu_ps(s.bias + h, Across<false>(s.chdot + h, std::min(16, heads - h)));
  }
  const __m512i order[3] = {_mm512_load_si512(kPackOrder.index[0]),
                            _mm512_load_si512(kPackOrder.index[1]),
                            _mm512_load_si512(kPackOrder.index[2])};
  const __mmask64 upper = 0xFFFFFFFF00000000ull;
  const int rows = groups == 1 ? 1 : 2;  // at head_dim 64 both rows of a chunk are group 0's
  for (int h = 0; h < heads; ++h) {
    const float* q = s.w->q + static_cast<long>(h) * d;
    __m512i* qd = s.qd + h * 6 * s.patterns;
    for (int p = 0; p < s.patterns; ++p) {
      __m512i row[2][6];
      for (int r = 0; r < rows; ++r) {
        const int g = (2 * p + r) % groups;
        __m512 x[4];
        for (int i = 0; i < 4; ++i) {
          const int c = 64 * g + 16 * i;
          x[i] = _mm512_mul_ps(_mm512_loadu_ps(q + c), _mm512_loadu_ps(scale + c));
        }
        RowDigits(x, _mm512_set1_ps(s.chinv[h * groups + g]), order, row[r]);
      }
      for (int k = 0; k < 6; ++k) {
        qd[6 * p + k] = rows == 1 ? row[0][k] : _mm512_mask_blend_epi8(upper, row[0][k], row[1][k]);
      }
    }
  }
}

// Copies n floats: up to 16 (every tile's, at up to 16 heads per KV head) as one masked move
// rather than a call to memcpy.
STRATA_AVX512_INLINE void CopyFloats(const float* from, int n, float* to) {
  if (n > 16) {
    std::memcpy(to, from, sizeof(float) * n);
    return;
  }
  const __mmask16 m = FirstBits(static_cast<unsigned>(n));
  _mm512_mask_storeu_ps(to, m, _mm512_maskz_loadu_ps(m, from));
}

// Keys by channel: readies the query of the key group of the tile at t (whose tokens all lie in
// one group) and keeps its digit scales and score offsets as tile u's.
STRATA_AVX512 void ChannelTile(const Pass& s, int t, int u) {
  constexpr int kC = kQ4ChannelGroup;
  const Work& w = *s.w;
  const int group = (t + w.key_phase) / kC;
  if (*s.key_group != group) {
    *s.key_group = group;
    ChannelQuery(s, w.k_params + (static_cast<long>(group) * kC - w.key_phase) * s.key_halves);
  }
  const int scales = s.heads * s.groups;
  CopyFloats(s.qscale, scales, s.tscale + u * scales);
  CopyFloats(s.bias, s.heads, s.tbias + u * s.heads);
}

// Scores of the step at t0 (kStepTiles tiles) from the key codes, then the online-softmax update:
// the weights and rescale factors for the step's values go to parity `b` of the buffers. The
// reference the probabilities are taken against only moves up when a score passes it by kSlack.
// kHeads and kGroups, when positive, are s.heads and s.groups known at compile time, so that the
// loops over them unroll; 0 reads them from s.
template <int kHeads, int kGroups>
STRATA_AVX512 void ScoreStep(const Pass& s, int t0, int b) {
  const Work& w = *s.w;
  const int groups = kGroups > 0 ? kGroups : s.groups, heads = kHeads > 0 ? kHeads : s.heads;
  const int d = 64 * groups;
  __mmask16 valid[kStepTiles];
  for (int u = 0; u < kStepTiles; ++u) {  // tile u: tokens t0 + 16 u ..
    const int t = t0 + u * kTile, n = std::clamp(w.len - t, 0, kTile);
    PrefetchTile(w.k_codes, w.k_params, s.key_halves, t + kStep, w.len, d);
    PrefetchTile(w.v_codes, w.v_params, 2 * groups, t + kStep, w.len, d);
    valid[u] = static_cast<__mmask16>((1u << n) - 1);
    if (n == 0) continue;
    if (w.key_phase >= 0) {
      ChannelTile(s, t, u);
    } else {
      UnpackParams(w.k_params + static_cast<long>(t) * 2 * groups, n, groups,
                   s.kparams + u * 2 * groups * kTile);
    }
    UnpackParams(w.v_params + static_cast<long>(t) * 2 * groups, n, groups,
                 s.vparams + u * 2 * groups * kTile);
    if (t == 0 && w.skip > 0) {  // tokens to leave out: zero probability, and zero value params
      const __mmask16 lead = FirstBits(static_cast<unsigned>(w.skip));
      valid[u] &= static_cast<__mmask16>(~lead);
      for (int r = 0; r < 2 * groups; ++r) {  // so that 0 · a stale value scale is never NaN
        _mm512_mask_storeu_ps(s.vparams + (u * 2 * groups + r) * kTile, lead, _mm512_setzero_ps());
      }
    }
    const uint8_t* codes = w.k_codes + static_cast<long>(t) * (d / 2);
    if (n < kTile) {
      std::memset(s.tail, 0, static_cast<size_t>(kTile) * d / 2);
      std::memcpy(s.tail, codes, static_cast<size_t>(n) * d / 2);
      codes = s.tail;
    }
    KeyDots(codes, heads, groups, s.patterns, s.qd, s.perm, s.which, s.dots + u * heads * groups);
  }
  StepWeights* wt = s.weights + b * groups * heads;
  const __m512 none = _mm512_set1_ps(-INFINITY);
  for (int h = 0; h < heads; ++h) {
    __m512 score[kStepTiles];
    for (int u = 0; u < kStepTiles; ++u) {
      const __m512i* dots = s.dots + (u * heads + h) * groups;
      if (w.key_phase >= 0) {  // keys by channel: q'·n + bias, q' of the tile's key group
        const float* ts = s.tscale + (u * heads + h) * groups;
        score[u] = _mm512_set1_ps(s.tbias[u * heads + h]);
        for (int g = 0; g < groups; ++g) {
          score[u] = _mm512_fmadd_ps(_mm512_set1_ps(ts[g]), _mm512_cvtepi32_ps(dots[g]), score[u]);
        }
        continue;
      }
      const float* kp = s.kparams + u * 2 * groups * kTile;
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
      StepWeights& wg = wt[g * heads + h];
      __m512 weight[kStepTiles], top = _mm512_setzero_ps();
      for (int u = 0; u < kStepTiles; ++u) {
        const float* vp = s.vparams + (u * groups + g) * 2 * kTile;
        weight[u] = _mm512_mul_ps(p[u], _mm512_loadu_ps(vp));
        top = _mm512_max_ps(top, weight[u]);
        st[2 + g] = _mm512_fmadd_ps(p[u], _mm512_loadu_ps(vp + kTile), st[2 + g]);
      }
      // Weights are >= 0; a step of tiny ones (below FLT_MAX / kWMax) rounds to zero, not NaN.
      const float wmax = _mm512_reduce_max_ps(top);
      const float inv = wmax > 0.0f ? std::min(kWMax / wmax, FLT_MAX) : 0.0f;
      wg.s = wmax / kWMax;
      const __m512 to_int = _mm512_set1_ps(inv), most = _mm512_set1_ps(kWMax);
      for (int u = 0; u < kStepTiles; ++u) {
        const __m512i big =
            _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(weight[u], to_int), most));
        _mm512_store_si512(wg.digit[u], _mm512_permutexvar_epi8(s.wbytes, big));
      }
    }
  }
}

// Adds the value codes of the step at t0, weighted by parity `b` of the buffers, to the outputs.
STRATA_AVX512 void ValueStep(const Pass& s, int t0, int b) {
  const int d = s.d, heads = s.heads, n = std::min(kStep, s.w->len - t0), count = (n + 3) / 4;
  const uint8_t* codes = s.w->v_codes + static_cast<long>(t0) * (d / 2);
  const StepWeights* wt = s.weights + b * s.groups * heads;
  for (int g = 0; g < s.groups; ++g) {
    if (heads == 1) {
      OneHeadValues(codes + 32 * g, n, d / 2, s.vindex, s.vtail, wt[g], s.corr[b * s.corr_stride],
                    s.acc + 64 * g);
      continue;
    }
    StepQuads(codes + 32 * g, n, d / 2, s.vindex, s.vtail, s.quads);
    for (int h = 0; h < heads; h += 4) {
      WithHeads<4>(heads - h, [&](auto k) {
        StepValues<decltype(k)::value>(s.quads, count, wt + g * heads + h,
                                       s.corr + b * s.corr_stride + h, d, s.acc + h * d + 64 * g);
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
  const int key_halves = w.key_phase >= 0 ? Q4ChannelParamHalves(d) : 2 * groups;
  for (int t = 0; t < kStep; t += kTile) {  // the first step arrives during the setup below
    PrefetchTile(w.k_codes, w.k_params, key_halves, t, w.len, d);
    PrefetchTile(w.v_codes, w.v_params, 2 * groups, t, w.len, d);
  }
  const Layout l = ScratchLayout(heads, d, w.len);
  Pass s;
  s.d = d;
  s.groups = groups;
  s.heads = heads;
  s.w = &w;
  s.patterns = groups % 2 == 1 ? groups : groups / 2;
  s.key_halves = key_halves;
  s.kparams = w.scratch + l.kparams;
  s.vparams = w.scratch + l.vparams;
  s.weights = reinterpret_cast<StepWeights*>(w.scratch + l.weights);
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
  s.quads = reinterpret_cast<Quad*>(w.scratch + l.quads);
  s.vtail = reinterpret_cast<uint8_t*>(w.scratch + l.vtail);
  s.acc = w.scratch + l.acc;
  int key_group = -1;  // keys by channel: no group's query is ready yet
  s.key_group = &key_group;
  s.chq = w.scratch + l.chq;
  s.bias = w.scratch + l.chbias;
  s.tscale = w.scratch + l.chtile;
  s.tbias = s.tscale + kStepTiles * heads * groups;
  s.chmax = reinterpret_cast<__m512*>(w.scratch + l.chred);
  s.chdot = s.chmax + heads * groups;
  s.chinv = reinterpret_cast<float*>(s.chdot + heads);
  alignas(64) uint8_t gather[2][64];  // lane i, byte r: byte 16 j + i of row r (QuadCodes)
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 16; ++i) {
      for (int r = 0; r < 4; ++r) gather[j][4 * i + r] = static_cast<uint8_t>(32 * r + 16 * j + i);
    }
  }
  s.vindex[0] = _mm512_load_si512(gather[0]);
  s.vindex[1] = _mm512_load_si512(gather[1]);
  alignas(64) uint8_t split[64] = {};  // byte 16 k + i: byte k of lane i
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 16; ++i) split[16 * k + i] = static_cast<uint8_t>(4 * i + k);
  }
  s.wbytes = _mm512_load_si512(split);

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
    if (w.key_phase < 0) QueryDigits(s, w.q + h * d, qd + h * 6 * s.patterns, qscale + h * groups);
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
      for (int i = 0; i < 64; ++i) o[i] = (a[i] + m) * inv;
    }
  }
}

}  // namespace strata::kernels::cpu::q4
